/* C twin of sdk/protocol/message_codec.py (rocketmq_sdk.protocol._cmessage_codec): the message
 * bodies of the protocol (docs/protocol.md §4.1, §4.5, §4.6).
 *
 * The pure-Python twins in message_codec.py stay the reference; compared by
 * tests/protocol/test_crecords.py. Anything unusual is left to them (None, or the offset where the
 * Python loop must go on).
 *
 *   configure_records(MessageExt, hosts, v4_host, topics, topic_str, decompress)
 *   decode_records(buf, pos, end, out, decompress, read_body) -> pos    (twin: _decode_records)
 *   encode_batch(messages, trailing_separator) -> bytes | None         (twin: encode_batch)
 *   decode_properties(text) -> dict                                    (twin: decode_properties_py)
 *   encode_properties(props, trailing_separator) -> str | None         (twin: encode_properties)
 */
#include "../_chelpers.h"

static PyObject *s_body, *s_properties, *s_flag_attr;

/* ------------------------------------------------------------------------------------------ */
/* Stored records (rocketmq_sdk.protocol.message_codec._decode_records, docs/protocol.md §4.5)       */

static PyTypeObject *ext_type = NULL; /* MessageExt */
static PyObject *rec_hosts, *rec_v4_host, *rec_topics, *rec_topic_str, *rec_decompress, *rec_empty_str;

/* the MessageExt slots, in this order */
static const char *const ext_slot_names[] = {
    "store_size", "body_crc", "queue_id", "flag", "queue_offset", "commit_log_offset", "sys_flag",
    "born_timestamp", "transaction_id", "broker_name", "born_host", "store_host", "_oid_prefix", "_oid",
    "_oid_phys", "reconsume_times", "prepared_transaction_offset", "store_timestamp", "body", "topic",
    "properties", NULL};
enum { X_STORE_SIZE, X_BODY_CRC, X_QUEUE_ID, X_FLAG, X_QUEUE_OFFSET, X_PHYS, X_SYS_FLAG, X_BORN_TS,
       X_TX_ID, X_BROKER_NAME, X_BORN_HOST, X_STORE_HOST, X_OID_PREFIX, X_OID, X_OID_PHYS, X_RECONSUME,
       X_PREPARED, X_STORE_TS, X_BODY, X_TOPIC, X_PROPERTIES, X_COUNT };
static Py_ssize_t ext_offsets[X_COUNT];

#define MESSAGE_MAGIC ((int32_t)0xDAA320A7)
#define SYS_COMPRESSED 0x1
#define SYS_V6_BITS (0x10 | 0x20) /* BORNHOST_V6 | STOREHOST_V6 */

/* ("a.b.c.d:port", prefix) for the IPv4 host key (memoised in the Python dict); new reference */
static PyObject *v4_host(uint64_t key) {
    PyObject *k = PyLong_FromUnsignedLongLong(key);
    if (k == NULL)
        return NULL;
    PyObject *host = PyDict_GetItemWithError(rec_hosts, k);
    if (host != NULL) {
        Py_DECREF(k);
        return Py_NewRef(host);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(k);
        return NULL;
    }
    host = PyObject_CallOneArg(rec_v4_host, k);
    Py_DECREF(k);
    if (host != NULL && (!PyTuple_Check(host) || PyTuple_GET_SIZE(host) != 2)) {
        Py_DECREF(host);
        PyErr_SetString(PyExc_TypeError, "_v4_host must return (host, prefix)");
        return NULL;
    }
    return host;
}

/* the properties dict of a docs/protocol.md §4.1 string, as decode_properties(str(raw, "utf-8")) builds it; NULL
 * with UnicodeDecodeError set when the bytes are not UTF-8 */
static PyObject *decode_props(const unsigned char *p, Py_ssize_t n) {
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while (i <= n) {
        Py_ssize_t sep, j = prop_item(p, n, i, &sep); /* item p[i:j]: key up to the first \x01 */
        int kind_k = 0, kind_v = 0;
        for (Py_ssize_t q = i; q < j; q++)
            if (p[q] >= 0x80) {
                if (q < sep)
                    kind_k = 1;
                else
                    kind_v = 1;
            }
        PyObject *k = str_of_utf8((const char *)p + i, sep - i, !kind_k);
        if (k == NULL)
            goto fail;
        Py_ssize_t vs = sep < j ? sep + 1 : j;
        PyObject *v = str_of_utf8((const char *)p + vs, j - vs, !kind_v);
        if (v == NULL) {
            Py_DECREF(k);
            goto fail;
        }
        if (sep < j && sep > i && j > vs) {
            if (PyDict_SetItem(d, k, v) < 0) {
                Py_DECREF(k);
                Py_DECREF(v);
                goto fail;
            }
        }
        Py_DECREF(k);
        Py_DECREF(v);
        i = j + 1;
    }
    return d;
fail:
    Py_DECREF(d);
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "properties are not UTF-8"); /* the Python loop reports it */
    return NULL;
}

/* decode_records(buf, pos, end, out, decompress, read_body) -> pos
 * Appends MessageExt objects for the records from pos while pos < end and returns the offset of
 * the first record it did not decode (end when all were): IPv6 hosts, bad data and anything
 * else unusual are left to the Python loop, which decodes or refuses that record. */
static PyObject *codec_decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "decode_records(buf, pos, end, out, decompress, read_body)");
        return NULL;
    }
    if (ext_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_cmessage_codec.configure_records() was not called");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t end = PyLong_AsSsize_t(args[2]);
    if ((pos == -1 || end == -1) && PyErr_Occurred())
        return NULL;
    int decompress = PyObject_IsTrue(args[4]);
    int read_body = PyObject_IsTrue(args[5]);
    if (decompress < 0 || read_body < 0)
        return NULL;
    PyObject *out = args[3];
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    if (pos < 0)
        goto stop;
    while (pos < end) {
        if (n - pos < 92) /* the smallest IPv4 record: 88 + topic length + properties length */
            break;
        const unsigned char *r = buf + pos;
        int32_t total = be32(r);
        if (be32(r + 4) != MESSAGE_MAGIC || total < 92 || total > n - pos)
            break;
        int32_t sys_flag = be32(r + 36);
        if (sys_flag & SYS_V6_BITS)
            break;
        int32_t body_len = be32(r + 84);
        if (body_len < 0 || body_len > total - 88 - 1 - 2)
            break;
        const unsigned char *p = r + 88 + body_len;
        int topic_len = p[0];
        if (topic_len > 127 || 88 + body_len + 1 + topic_len + 2 > total)
            break;
        const unsigned char *topic_raw = p + 1;
        p += 1 + topic_len;
        int16_t props_len = (int16_t)(((unsigned)p[0] << 8) | p[1]);
        p += 2;
        Py_ssize_t used = (p - r) + (props_len > 0 ? props_len : 0);
        if (used != total)
            break;
        /* the record is well formed: build it (a Python error now is a real one, except bad
         * UTF-8 or zlib data, which the Python loop reports as FrameError) */
        PyObject *m = ext_type->tp_alloc(ext_type, 0);
        if (m == NULL)
            goto error;
        int64_t phys = be64(r + 28);
        uint64_t born_key = (uint64_t)be64(r + 48), store_key = (uint64_t)be64(r + 64);
        PyObject *born = v4_host(born_key);
        PyObject *store = born != NULL ? (store_key == born_key ? Py_NewRef(born) : v4_host(store_key)) : NULL;
        PyObject *topic = NULL, *body = NULL, *props = NULL;
        if (store == NULL)
            goto record_error;
        {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)topic_raw, topic_len);
            if (raw == NULL)
                goto record_error;
            topic = PyDict_GetItemWithError(rec_topics, raw);
            if (topic != NULL)
                Py_INCREF(topic);
            else if (!PyErr_Occurred())
                topic = PyObject_CallOneArg(rec_topic_str, raw);
            Py_DECREF(raw);
            if (topic == NULL)
                goto record_error;
        }
        if (read_body) {
            body = PyBytes_FromStringAndSize((const char *)r + 88, body_len);
            if (body != NULL && decompress && (sys_flag & SYS_COMPRESSED))
                Py_SETREF(body, PyObject_CallOneArg(rec_decompress, body));
        } else {
            body = PyBytes_FromStringAndSize(NULL, 0);
        }
        if (body == NULL)
            goto record_error;
        props = props_len > 0 ? decode_props(p, props_len) : PyDict_New();
        if (props == NULL)
            goto record_error;
        PyObject *vals[X_COUNT] = {
            PyLong_FromLong(total), PyLong_FromLong(be32(r + 8)), PyLong_FromLong(be32(r + 12)),
            PyLong_FromLong(be32(r + 16)), PyLong_FromLongLong(be64(r + 20)), PyLong_FromLongLong(phys),
            PyLong_FromLong(sys_flag), PyLong_FromLongLong(be64(r + 40)), Py_NewRef(Py_None),
            Py_NewRef(rec_empty_str), Py_NewRef(PyTuple_GET_ITEM(born, 0)),
            Py_NewRef(PyTuple_GET_ITEM(store, 0)), Py_NewRef(PyTuple_GET_ITEM(store, 1)), Py_NewRef(Py_None),
            PyLong_FromLongLong(phys), PyLong_FromLong(be32(r + 72)), PyLong_FromLongLong(be64(r + 76)),
            PyLong_FromLongLong(be64(r + 56)), body, topic, props};
        body = topic = props = NULL;
        int ok = 1;
        for (int i = 0; i < X_COUNT; i++) {
            if (vals[i] == NULL)
                ok = 0;
            put_slot(m, ext_offsets[i], vals[i]); /* a NULL slot reads as AttributeError; m is dropped anyway */
        }
        Py_DECREF(born);
        Py_DECREF(store);
        born = store = NULL;
        if (!ok || PyList_Append(out, m) < 0) {
            Py_DECREF(m);
            goto error;
        }
        Py_DECREF(m);
        pos += total;
        continue;
    record_error:
        Py_XDECREF(born);
        Py_XDECREF(store);
        Py_XDECREF(topic);
        Py_XDECREF(body);
        Py_XDECREF(props);
        Py_DECREF(m);
        if (PyErr_ExceptionMatches(PyExc_Exception)) {
            /* bad UTF-8, bad zlib data: the Python loop raises the FrameError for it */
            PyErr_Clear();
            break;
        }
        goto error;
    }
stop:
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
error:
    PyBuffer_Release(&view);
    return NULL;
}

static PyObject *codec_configure_records(PyObject *self, PyObject *args) {
    PyObject *cls, *hosts, *v4, *topics, *topic_str, *decompress;
    if (!PyArg_ParseTuple(args, "O!O!OO!OO", &PyType_Type, &cls, &PyDict_Type, &hosts, &v4, &PyDict_Type, &topics,
                          &topic_str, &decompress))
        return NULL;
    if (slot_offsets(cls, ext_slot_names, ext_offsets) < 0)
        return NULL;
    Py_XSETREF(ext_type, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(rec_hosts, Py_NewRef(hosts));
    Py_XSETREF(rec_v4_host, Py_NewRef(v4));
    Py_XSETREF(rec_topics, Py_NewRef(topics));
    Py_XSETREF(rec_topic_str, Py_NewRef(topic_str));
    Py_XSETREF(rec_decompress, Py_NewRef(decompress));
    if (rec_empty_str == NULL && (rec_empty_str = PyUnicode_New(0, 0)) == NULL)
        return NULL;
    Py_RETURN_NONE;
}
/* ------------------------------------------------------------------------------------------ */
/* Batch bodies (message_codec.encode_batch, docs/protocol.md §4.6)                                 */

/* Writes the properties string of one message; FALLBACK for anything but str keys and values
 * (and None values, skipped) or strings that cannot be UTF-8 encoded. */
static int w_properties(Writer *w, PyObject *props, int trailing) {
    if (!PyDict_CheckExact(props))
        return FALLBACK;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1;
    while (PyDict_Next(props, &pos, &k, &v)) {
        if (v == Py_None)
            continue;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v))
            return FALLBACK;
        Py_ssize_t kn, vn;
        int r = 0;
        const char *ks = utf8_of(k, &kn, &r);
        const char *vs = ks != NULL ? utf8_of(v, &vn, &r) : NULL;
        if (vs == NULL)
            return r;
        if (w_reserve(w, kn + vn + 2) < 0)
            return FAILED;
        if (!first)
            w->buf[w->len++] = 2;
        first = 0;
        memcpy(w->buf + w->len, ks, kn);
        w->len += kn;
        w->buf[w->len++] = 1;
        memcpy(w->buf + w->len, vs, vn);
        w->len += vn;
    }
    if (trailing && !first) {
        if (w_reserve(w, 1) < 0)
            return FAILED;
        w->buf[w->len++] = 2;
    }
    return 0;
}

/* encode_batch(messages, trailing_separator) -> bytes | None: the batch body, or None when the
 * Python encoder must handle it (or raise: non-str properties, flags beyond an int, ...). */
static PyObject *codec_encode_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "encode_batch(messages, trailing_separator)");
        return NULL;
    }
    int trailing = PyObject_IsTrue(args[1]);
    if (trailing < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "encode_batch: messages must be a sequence");
    if (seq == NULL)
        return NULL;
    Writer w;
    w_init(&w, 0);
    PyObject *result = NULL;
    int r = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && r == 0; i++) {
        PyObject *m = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *props = PyObject_GetAttr(m, s_properties);
        PyObject *body = props != NULL ? PyObject_GetAttr(m, s_body) : NULL;
        PyObject *flag = body != NULL ? PyObject_GetAttr(m, s_flag_attr) : NULL;
        if (flag == NULL) {
            r = FAILED;
        } else if (!PyBytes_CheckExact(body) || !PyLong_CheckExact(flag)) {
            r = FALLBACK;
        } else {
            int overflow;
            long long fv = PyLong_AsLongLongAndOverflow(flag, &overflow);
            Py_ssize_t blen = PyBytes_GET_SIZE(body);
            if (overflow || fv < INT32_MIN || fv > INT32_MAX || blen > INT32_MAX - 64) {
                r = FALLBACK;
            } else if (w_reserve(&w, 20 + blen + 2) < 0) {
                r = FAILED;
            } else {
                Py_ssize_t head = w.len;
                w.len += 20;
                memcpy(w.buf + w.len, PyBytes_AS_STRING(body), blen);
                w.len += blen + 2;
                Py_ssize_t props_at = w.len;
                r = w_properties(&w, props, trailing);
                Py_ssize_t plen = w.len - props_at;
                long long total = 20 + (long long)blen + 2 + plen;
                if (r == 0 && (plen > 32767 || total > INT32_MAX))
                    r = FALLBACK;
                if (r == 0) {
                    char *o = w.buf + head;
                    put_be32(o, (uint32_t)total);
                    put_be32(o + 4, 0);
                    put_be32(o + 8, 0);
                    put_be32(o + 12, (uint32_t)(int32_t)fv);
                    put_be32(o + 16, (uint32_t)blen);
                    w.buf[props_at - 2] = (char)(plen >> 8);
                    w.buf[props_at - 1] = (char)plen;
                }
            }
        }
        Py_XDECREF(props);
        Py_XDECREF(body);
        Py_XDECREF(flag);
    }
    if (r == 0)
        result = PyBytes_FromStringAndSize(w.buf, w.len);
    else if (r == FALLBACK)
        result = Py_NewRef(Py_None);
    w_free(&w);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Properties strings (message_codec.decode_properties / encode_properties, docs/protocol.md §4.1)  */

/* decode_properties(text: str) -> dict: "k\x01v\x02..." items; items without a separator, an
 * empty name or an empty value are skipped (a trailing separator too). */
static PyObject *codec_decode_properties(PyObject *self, PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "properties must be a str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0;
    while (n > 0 && i <= n) {
        Py_ssize_t j = PyUnicode_FindChar(text, 2, i, n, 1);
        if (j == -2)
            goto fail;
        if (j == -1)
            j = n;
        Py_ssize_t sep = j > i ? PyUnicode_FindChar(text, 1, i, j, 1) : -1;
        if (sep == -2)
            goto fail;
        if (sep > i && j > sep + 1) {
            PyObject *k = PyUnicode_Substring(text, i, sep);
            PyObject *v = k != NULL ? PyUnicode_Substring(text, sep + 1, j) : NULL;
            int r = v != NULL ? PyDict_SetItem(d, k, v) : -1;
            Py_XDECREF(k);
            Py_XDECREF(v);
            if (r < 0)
                goto fail;
        }
        i = j + 1;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* encode_properties(props: dict, trailing_separator: bool) -> str | None: None when a name or
 * value is not a str (the Python encoder formats it). None values are skipped. */
static PyObject *codec_encode_properties(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode_properties(props: dict, trailing_separator)");
        return NULL;
    }
    PyObject *props = args[0];
    int trailing = PyObject_IsTrue(args[1]);
    if (trailing < 0)
        return NULL;
    Py_ssize_t pos = 0, total = 0, count = 0;
    Py_UCS4 maxchar = 127;
    PyObject *k, *v;
    while (PyDict_Next(props, &pos, &k, &v)) {
        if (v == Py_None)
            continue;
        if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v))
            Py_RETURN_NONE;
        total += PyUnicode_GET_LENGTH(k) + 1 + PyUnicode_GET_LENGTH(v);
        Py_UCS4 mk = PyUnicode_MAX_CHAR_VALUE(k), mv = PyUnicode_MAX_CHAR_VALUE(v);
        if (mk > maxchar)
            maxchar = mk;
        if (mv > maxchar)
            maxchar = mv;
        count++;
    }
    if (count == 0)
        return PyUnicode_New(0, 0);
    total += count - 1 + (trailing ? 1 : 0);
    PyObject *out = PyUnicode_New(total, maxchar);
    if (out == NULL)
        return NULL;
    int kind = PyUnicode_KIND(out);
    void *data = PyUnicode_DATA(out);
    Py_ssize_t o = 0;
    pos = 0;
    int first = 1;
    while (PyDict_Next(props, &pos, &k, &v)) {
        if (v == Py_None)
            continue;
        if (!first)
            PyUnicode_WRITE(kind, data, o++, 2);
        first = 0;
        Py_ssize_t kn = PyUnicode_GET_LENGTH(k), vn = PyUnicode_GET_LENGTH(v);
        if (PyUnicode_CopyCharacters(out, o, k, 0, kn) < 0)
            goto fail;
        o += kn;
        PyUnicode_WRITE(kind, data, o++, 1);
        if (PyUnicode_CopyCharacters(out, o, v, 0, vn) < 0)
            goto fail;
        o += vn;
    }
    if (trailing)
        PyUnicode_WRITE(kind, data, o++, 2);
    if (o != total) { /* the dict changed under us (a str subclass's __eq__?): let Python do it */
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure_records", codec_configure_records, METH_VARARGS,
     "configure_records(MessageExt, hosts, v4_host, topics, topic_str, decompress): the record decoder's "
     "class, caches and helpers (rocketmq_sdk.protocol.message_codec)."},
    {"decode_records", (PyCFunction)(void (*)(void))codec_decode_records, METH_FASTCALL,
     "decode_records(buf, pos, end, out, decompress, read_body) -> pos: append MessageExt objects of the "
     "plain records from pos; returns where the Python decoder must go on (end when done)."},
    {"encode_batch", (PyCFunction)(void (*)(void))codec_encode_batch, METH_FASTCALL,
     "encode_batch(messages, trailing_separator) -> bytes | None: the docs/protocol.md §4.6 batch body, or None when "
     "the Python encoder must handle it."},
    {"decode_properties", codec_decode_properties, METH_O,
     "decode_properties(text) -> dict: a docs/protocol.md §4.1 properties string parsed as message_codec.decode_properties."},
    {"encode_properties", (PyCFunction)(void (*)(void))codec_encode_properties, METH_FASTCALL,
     "encode_properties(props, trailing_separator) -> str | None: the docs/protocol.md §4.1 string, or None when a name "
     "or value is not a str."},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_cmessage_codec",
            "C twin of rocketmq_sdk.protocol.message_codec: stored records, batch bodies, properties strings.");

PyMODINIT_FUNC PyInit__cmessage_codec(void) {
    if ((s_body = PyUnicode_InternFromString("body")) == NULL ||
        (s_properties = PyUnicode_InternFromString("properties")) == NULL ||
        (s_flag_attr = PyUnicode_InternFromString("flag")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
