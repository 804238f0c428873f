/* C twin of broker-reference/store/commit_log.py (rocketmq_broker.store._ccommit_log): one
 * CommitLog record (docs/protocol.md §4.5).
 *
 * encode_record(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
 *               store_timestamp, queue_offset, physical_offset, reconsume_times, prepared_transaction_offset)
 *   the record CommitLog._place writes; pure-Python twin: commit_log.encode_record_py, compared byte
 *   for byte by tests/store/test_cstore.py. Loaded only through rocketmq_sdk._speedups.load (None
 *   with ROCKETMQ_PURE_PYTHON set).
 */
#include "_crecord.h"

static PyObject *StructError;  /* struct.error: what the twin's struct.pack raises */

/* encode_record(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
 *               store_timestamp, queue_offset, physical_offset, reconsume_times, prepared_transaction_offset)
 * One CommitLog record (section 4.5) as bytes: message_codec.encode_stored_message with the body CRC
 * computed (twin: commit_log.encode_record_py). Raises as the twin: struct.error for an int field
 * that is not an int or out of range and for properties over 32767 bytes, IndexError for a topic
 * over 255 bytes (the store's checks keep all of those out). */
static PyObject *encode_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "encode_record takes 14 positional arguments");
        return NULL;
    }
    Py_buffer topic = {0}, body = {0}, props = {0}, born = {0}, store = {0};
    PyObject *result = NULL;
    long long v[9];  /* queue_id, flag, sys_flag, born_ts, store_ts, queue_offset, phy, reconsume, prepared */
    static const int idx[9] = {3, 4, 5, 6, 9, 10, 11, 12, 13};
    for (int i = 0; i < 9; i++) {  /* as struct.pack: struct.error for a non-int or out of range */
        int is_int = i == 0 || i == 1 || i == 2 || i == 7;
        v[i] = PyLong_Check(args[idx[i]]) ? PyLong_AsLongLong(args[idx[i]]) : -1;
        if ((v[i] == -1 && (PyErr_Occurred() || !PyLong_Check(args[idx[i]]))) ||
            (is_int && (v[i] < INT32_MIN || v[i] > INT32_MAX))) {
            PyErr_Clear();
            PyErr_SetString(StructError, "record field is not an integer in range");
            return NULL;
        }
    }
    if (PyObject_GetBuffer(args[0], &topic, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[1], &body, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[2], &props, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[7], &born, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[8], &store, PyBUF_SIMPLE) < 0) goto done;
    if (body.len > INT32_MAX - 1024 || born.len > 1024 || store.len > 1024) {
        PyErr_SetString(StructError, "body or host too long");
        goto done;
    }
    if (topic.len > 255) {  /* the twin's topic-length table has 256 entries */
        PyErr_SetString(PyExc_IndexError, "topic longer than 255 bytes");
        goto done;
    }
    if (props.len > MAX_PROPERTIES_LENGTH) {
        PyErr_SetString(StructError, "properties longer than 32767 bytes");
        goto done;
    }
    Py_ssize_t size = 75 + born.len + store.len + body.len + topic.len + props.len;
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) goto done;
    long long crc = body_crc((const unsigned char *)body.buf, body.len);
    if (crc < 0) {
        Py_CLEAR(result);
        goto done;
    }
    unsigned char *w = write_record_head((unsigned char *)PyBytes_AS_STRING(result), size, crc, v[0], v[1], v[5], v[6],
                                         v[2], v[3], &born, v[4], &store, v[7], v[8], body.buf, body.len, topic.buf,
                                         topic.len, props.len);
    memcpy(w, props.buf, (size_t)props.len);
done:
    if (topic.obj) PyBuffer_Release(&topic);
    if (body.obj) PyBuffer_Release(&body);
    if (props.obj) PyBuffer_Release(&props);
    if (born.obj) PyBuffer_Release(&born);
    if (store.obj) PyBuffer_Release(&store);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL,
     "encode_record(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host, "
     "store_timestamp, queue_offset, physical_offset, reconsume_times, prepared_transaction_offset) -> bytes"},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_ccommit_log",
            "C twin of rocketmq_broker.store.commit_log: one CommitLog record.");

PyMODINIT_FUNC PyInit__ccommit_log(void) {
    if (record_helpers_init() < 0) return NULL;
    if (StructError == NULL) {
        PyObject *st = PyImport_ImportModule("struct");
        if (st == NULL) return NULL;
        StructError = PyObject_GetAttrString(st, "error");
        Py_DECREF(st);
        if (StructError == NULL) return NULL;
    }
    return PyModule_Create(&module);
}
