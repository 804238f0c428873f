/* C twin of integrations/spark/arrow_records.py (rocketmq_sdk.integrations.spark._carrow_records): the
 * stored records of a pull body (docs/protocol.md §4.5) appended to the Arrow buffers of the rocketmq
 * source's columns.
 *
 *   configure(reserved)                                  reserved: sorted list of the reserved property names (bytes)
 *   decode_into(bufs, body, pos, end, lo, hi) -> pos     (twin: arrow_records.decode_into_py)
 *
 * decode_into appends the rows of the records from ``pos`` whose queue offset is in [lo, hi) and returns
 * ``end``, or the offset of the first record it leaves to the Python twin: an IPv6 host, a compressed body,
 * a non-ASCII topic or properties string, a property name given twice, more than MAX_PROPS properties,
 * or anything malformed (the Python twin raises the error). Nothing of such a record is appended.
 */
#include "../../sdk/_chelpers.h"
#include "_cspark.h"

enum { BODY_OFF, BODY_DATA, TOPIC_OFF, TOPIC_DATA, TAGS_OFF, TAGS_DATA, TAGS_VALID, KEYS_OFF, KEYS_DATA,
       KEYS_VALID, MAP_OFF, MAPK_OFF, MAPK_DATA, MAPV_OFF, MAPV_DATA, QUEUE_ID, QUEUE_OFFSET, MSGID_OFF,
       MSGID_DATA, BORN_US, STORE_US, RECONSUME, BUFFER_COUNT };

#define MESSAGE_MAGIC ((int32_t)0xDAA320A7)
#define SYS_COMPRESSED 0x1
#define SYS_V6_BITS (0x10 | 0x20) /* BORNHOST_V6 | STOREHOST_V6 */
#define MAX_PROPS 64
#define MAX_TIMESTAMP_MS (INT64_MAX / 1000) /* beyond: out of Arrow's µs range, Python raises */

static inline int key_is(const unsigned char *k, Py_ssize_t n, const char *lit, Py_ssize_t lit_n) {
    return n == lit_n && memcmp(k, lit, (size_t)n) == 0;
}

static inline int put_i32(PyObject *ba, int32_t v) { return put(ba, &v, 4); } /* little-endian host */
static inline int put_i64(PyObject *ba, int64_t v) { return put(ba, &v, 8); }

/* the value bytes then the new end offset of a string column */
static inline int put_text(PyObject **b, int off, int data, const void *p, Py_ssize_t n) {
    if (put(b[data], p, n) < 0)
        return -1;
    return put_i32(b[off], (int32_t)PyByteArray_GET_SIZE(b[data]));
}

typedef struct {
    const unsigned char *k, *v;
    Py_ssize_t kn, vn;
} Prop;

/* split a properties string as decode_properties does; the count, or -1: leave the record to Python */
static int split_props(const unsigned char *p, Py_ssize_t n, Prop *out) {
    int count = 0;
    for (Py_ssize_t q = 0; q < n; q++)
        if (p[q] >= 0x80)
            return -1;
    Py_ssize_t i = 0;
    while (i <= n) {
        Py_ssize_t sep, j = prop_item(p, n, i, &sep);
        if (sep < j && sep > i && j > sep + 1) { /* a key and a value, both non-empty */
            if (count == MAX_PROPS)
                return -1;
            Prop *e = &out[count];
            e->k = p + i;
            e->kn = sep - i;
            e->v = p + sep + 1;
            e->vn = j - sep - 1;
            for (int c = 0; c < count; c++)
                if (out[c].kn == e->kn && memcmp(out[c].k, e->k, (size_t)e->kn) == 0)
                    return -1; /* the dict keeps the last value at the first position: Python's job */
            count++;
        }
        i = j + 1;
    }
    return count;
}

static void hex_upper(char *o, const unsigned char *p, int n) {
    static const char hex[] = "0123456789ABCDEF";
    for (int i = 0; i < n; i++) {
        o[2 * i] = hex[p[i] >> 4];
        o[2 * i + 1] = hex[p[i] & 15];
    }
}

static PyObject *decode_into(PyObject *self, PyObject *args) {
    PyObject *bufs;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "O!y*nnLL", &PyList_Type, &bufs, &view, &pos, &end, &lo, &hi))
        return NULL;
    PyObject *b[BUFFER_COUNT];
    if (PyList_GET_SIZE(bufs) != BUFFER_COUNT) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "decode_into() needs the 22 buffers of RecordColumns");
        return NULL;
    }
    for (int i = 0; i < BUFFER_COUNT; i++) {
        b[i] = PyList_GET_ITEM(bufs, i);
        if (!PyByteArray_CheckExact(b[i])) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "decode_into() needs bytearray buffers");
            return NULL;
        }
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    if (end > n)
        end = n;
    Prop props[MAX_PROPS];
    while (pos < end) {
        const unsigned char *r = buf + pos;
        if (n - pos < 88)
            break;
        int32_t total = be32(r);
        if (be32(r + 4) != MESSAGE_MAGIC || total < 88 + 3 || total > n - pos)
            break;
        int32_t sys_flag = be32(r + 36);
        if (sys_flag & (SYS_V6_BITS | SYS_COMPRESSED))
            break;
        int32_t body_len = be32(r + 84);
        if (body_len < 0 || body_len > total - 88 - 3)
            break;
        Py_ssize_t p = 88 + body_len;
        int topic_len = r[p];
        if (topic_len > 127 || p + 1 + topic_len + 2 > total)
            break;
        const unsigned char *topic = r + p + 1;
        int ascii = 1;
        for (int q = 0; q < topic_len; q++)
            if (topic[q] >= 0x80)
                ascii = 0;
        if (!ascii)
            break;
        p += 1 + topic_len;
        int props_len = (int16_t)(((unsigned)r[p] << 8) | r[p + 1]);
        p += 2;
        if (props_len < 0 || p + props_len != total)
            break;
        int64_t born_ms = be64(r + 40), store_ms = be64(r + 56);
        if (born_ms > MAX_TIMESTAMP_MS || born_ms < -MAX_TIMESTAMP_MS || store_ms > MAX_TIMESTAMP_MS ||
            store_ms < -MAX_TIMESTAMP_MS)
            break;
        int64_t queue_offset = be64(r + 20);
        if (queue_offset < lo || queue_offset >= hi) {
            pos += total;
            continue;
        }
        int count = split_props(r + p, props_len, props);
        if (count < 0)
            break;
        const Prop *tags = NULL, *keys = NULL, *uniq = NULL;
        int user = 0;
        for (int i = 0; i < count; i++) {
            const Prop *e = &props[i];
            if (key_is(e->k, e->kn, "TAGS", 4))
                tags = e;
            else if (key_is(e->k, e->kn, "KEYS", 4))
                keys = e;
            else if (key_is(e->k, e->kn, "UNIQ_KEY", 8))
                uniq = e;
            else if (!is_reserved(e->k, e->kn))
                user++;
        }
        /* the row: nothing can fail below but memory */
        if (put_text(b, BODY_OFF, BODY_DATA, r + 88, body_len) < 0 ||
            put_text(b, TOPIC_OFF, TOPIC_DATA, topic, topic_len) < 0 ||
            put_text(b, TAGS_OFF, TAGS_DATA, tags ? tags->v : NULL, tags ? tags->vn : 0) < 0 ||
            put(b[TAGS_VALID], tags ? "\1" : "\0", 1) < 0 ||
            put_text(b, KEYS_OFF, KEYS_DATA, keys ? keys->v : NULL, keys ? keys->vn : 0) < 0 ||
            put(b[KEYS_VALID], keys ? "\1" : "\0", 1) < 0)
            goto error;
        for (int i = 0; user && i < count; i++) {
            const Prop *e = &props[i];
            if (e == tags || e == keys || e == uniq || is_reserved(e->k, e->kn))
                continue;
            if (put_text(b, MAPK_OFF, MAPK_DATA, e->k, e->kn) < 0 || put_text(b, MAPV_OFF, MAPV_DATA, e->v, e->vn) < 0)
                goto error;
        }
        int32_t entries_before;
        memcpy(&entries_before, PyByteArray_AS_STRING(b[MAP_OFF]) + PyByteArray_GET_SIZE(b[MAP_OFF]) - 4, 4);
        char oid[32];
        const void *msg_id = oid;
        Py_ssize_t msg_id_len = 32;
        if (uniq) {
            msg_id = uniq->v;
            msg_id_len = uniq->vn;
        } else {
            hex_upper(oid, r + 64, 8); /* store host: ip, port */
            hex_upper(oid + 16, r + 28, 8); /* PHYSICALOFFSET */
        }
        if (put_i32(b[MAP_OFF], entries_before + user) < 0 || put_i32(b[QUEUE_ID], be32(r + 12)) < 0 ||
            put_i64(b[QUEUE_OFFSET], queue_offset) < 0 || put_text(b, MSGID_OFF, MSGID_DATA, msg_id, msg_id_len) < 0 ||
            put_i64(b[BORN_US], born_ms * 1000) < 0 || put_i64(b[STORE_US], store_ms * 1000) < 0 ||
            put_i32(b[RECONSUME], be32(r + 72)) < 0)
            goto error;
        pos += total;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos < end ? pos : end);
error:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_O, "configure(reserved): the reserved property names, as bytes"},
    {"decode_into", decode_into, METH_VARARGS,
     "decode_into(bufs, body, pos, end, lo, hi) -> pos: append the rows of the records with a queue offset in "
     "[lo, hi); the offset of a record left to the Python twin, else end"},
    {NULL, NULL, 0, NULL}};

TWIN_MODULE("rocketmq_sdk.integrations.spark._carrow_records", "C twin of arrow_records.py");

PyMODINIT_FUNC PyInit__carrow_records(void) { return PyModule_Create(&module); }
