/* C twin of broker-reference/store/batch_records.py (rocketmq_broker.store._cbatch_records): the
 * CommitLog records of a whole batch and of a plain single send, built outside the store's lock.
 *
 * Pure-Python twins: batch_records.py (encode_batch_py, encode_single_py, place_single_py,
 * finish_batch_py); compared byte for byte by tests/store/test_cstore.py and
 * tests/store/test_single_put.py. Loaded only through rocketmq_sdk._speedups.load (None with
 * ROCKETMQ_PURE_PYTHON set).
 *
 * encode_batch(body, topic, extra, queue_id, sys_flag, born_timestamp, born_host, store_host,
 *              reconsume_times, max_message_size, file_size)
 *   Splits a SEND_BATCH_MESSAGE body (section 4.6), merges each message's properties with the
 *   batch's `extra` ones (a tuple of (key bytes, value bytes, key str, value str): added when the
 *   message lacks the key, as dict.setdefault), and builds the CommitLog records (section 4.5)
 *   with queue offset, physical offset and store timestamp left 0 (finish_batch fills them in).
 *   Returns (records bytearray, sizes list, tags codes list, properties dicts list), or None when
 *   anything is unusual (malformed body, invalid UTF-8, empty batch, a record the store would
 *   refuse, more than 64 property items in one message): the caller then takes the pure-Python
 *   path, which produces the exact refusal.
 *
 * encode_single(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
 *               reconsume_times, max_message_size, file_size)
 *   The record of one plain single send (MessageStore.put_plain), properties from a dict, offsets and
 *   store timestamp left 0 for finish_batch; (record bytearray, size, tags code) or None to decline.
 *
 * place_single(record, tags_code, store_host, born_host_len, physical_offset, queue_offset, now,
 *              commit_log_map, commit_log_pos, consume_queue_map, consume_queue_pos)
 *   That record finished (as finish_batch) straight into its CommitLog file's mapping and its consume-queue
 *   entry into the queue file's mapping; returns the offset msg id.
 *
 * finish_batch(records, tags, store_host, born_host_len, physical_offset, queue_offset, now)
 *   Writes the offsets and store timestamp into the records in place and returns
 *   (consume-queue entries bytes (20 per record), offset msg ids "id,id,...", physical offsets list).
 */
#include "_crecord.h"

#define MAX_ITEMS 64

/* ---- UTF-8: strict validation (as Python's decoder) and Java String.hashCode ---------------- */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (i + 1 >= n || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;  /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0;  /* surrogates */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= n) return 0;
            unsigned char c1 = s[i + 1];
            if ((c1 & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 || (s[i + 3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;
            if (c == 0xF4 && c1 > 0x8F) return 0;
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

/* Java hashCode of valid UTF-8 text (UTF-16 code units, int32 wrap-around). */
static int32_t java_hash_utf8(const unsigned char *s, Py_ssize_t n) {
    uint32_t h = 0;
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        uint32_t cp;
        if (c < 0x80) { cp = c; i += 1; }
        else if (c < 0xE0) { cp = (uint32_t)(c & 0x1F) << 6 | (s[i + 1] & 0x3F); i += 2; }
        else if (c < 0xF0) { cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F); i += 3; }
        else {
            cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 | (uint32_t)(s[i + 2] & 0x3F) << 6 |
                 (s[i + 3] & 0x3F);
            i += 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = 31u * h + (0xD800u + (cp >> 10));
            h = 31u * h + (0xDC00u + (cp & 0x3FF));
        } else {
            h = 31u * h + cp;
        }
    }
    return (int32_t)h;
}

/* ---- growable output ------------------------------------------------------------------------ */
typedef struct {
    unsigned char *p;
    Py_ssize_t len, cap;
} Out;

static int out_reserve(Out *o, Py_ssize_t extra) {
    if (o->len + extra <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 4096;
    while (cap < o->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) { PyErr_NoMemory(); return -1; }
        cap *= 2;
    }
    unsigned char *np = PyMem_Realloc(o->p, (size_t)cap);
    if (np == NULL) { PyErr_NoMemory(); return -1; }
    o->p = np;
    o->cap = cap;
    return 0;
}

/* one property item: spans into the batch body, or an index into the batch's extra items */
typedef struct {
    const unsigned char *k, *v;
    Py_ssize_t kl, vl;
    Py_ssize_t extra;  /* -1: the message's own item; else index of the extra item */
} Item;

typedef struct {
    const unsigned char *k, *v;
    Py_ssize_t kl, vl;
    PyObject *ks, *vs;  /* borrowed */
} Extra;

/* Properties of one message merged as decode_properties + setdefault(extra); returns the item
 * count or -1 to decline (too many items). */
static Py_ssize_t merge_props(const unsigned char *s, Py_ssize_t n, const Extra *extras, Py_ssize_t nextra,
                              Item *items) {
    Py_ssize_t count = 0, start = 0;
    if (n > 0) {
        Py_ssize_t raw = 1;
        for (Py_ssize_t i = 0; i < n; i++) raw += s[i] == 2;
        if (raw > MAX_ITEMS) return -1;
        while (start <= n) {
            Py_ssize_t end = start;
            while (end < n && s[end] != 2) end++;
            /* item s[start:end]: key up to the first \x01 */
            Py_ssize_t sep = start;
            while (sep < end && s[sep] != 1) sep++;
            if (sep < end && sep > start && end - sep - 1 > 0) {
                const unsigned char *k = s + start, *v = s + sep + 1;
                Py_ssize_t kl = sep - start, vl = end - sep - 1, j;
                for (j = 0; j < count; j++)
                    if (items[j].kl == kl && memcmp(items[j].k, k, (size_t)kl) == 0) break;
                if (j < count) {
                    items[j].v = v;
                    items[j].vl = vl;
                } else {
                    items[count].k = k; items[count].kl = kl; items[count].v = v; items[count].vl = vl;
                    items[count].extra = -1;
                    count++;
                }
            }
            start = end + 1;
        }
    }
    for (Py_ssize_t e = 0; e < nextra; e++) {
        Py_ssize_t j;
        for (j = 0; j < count; j++)
            if (items[j].kl == extras[e].kl && memcmp(items[j].k, extras[e].k, (size_t)extras[e].kl) == 0) break;
        if (j == count) {
            items[count].k = extras[e].k; items[count].kl = extras[e].kl;
            items[count].v = extras[e].v; items[count].vl = extras[e].vl;
            items[count].extra = e;
            count++;
        }
    }
    return count;
}

/* Short property keys and values repeat from message to message ("UNIQ_KEY", "WAIT", "true", tags):
 * their str objects are kept in a small direct-mapped cache (the GIL guards it). */
#define STR_CACHE_SLOTS 64
#define STR_CACHE_MAX 24
static struct {
    Py_ssize_t len;
    unsigned char data[STR_CACHE_MAX];
    PyObject *str;
} str_cache[STR_CACHE_SLOTS];

static PyObject *utf8_str(const unsigned char *s, Py_ssize_t n) {
    if (n == 0 || n > STR_CACHE_MAX) return PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    unsigned slot = ((unsigned)n * 31u + s[0] * 7u + s[n - 1] + s[n / 2] * 3u) % STR_CACHE_SLOTS;
    if (str_cache[slot].str != NULL && str_cache[slot].len == n && memcmp(str_cache[slot].data, s, (size_t)n) == 0) {
        Py_INCREF(str_cache[slot].str);
        return str_cache[slot].str;
    }
    PyObject *str = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
    if (str == NULL) return NULL;
    Py_XSETREF(str_cache[slot].str, Py_NewRef(str));
    str_cache[slot].len = n;
    memcpy(str_cache[slot].data, s, (size_t)n);
    return str;
}

static PyObject *props_dict(const Item *items, Py_ssize_t count, const Extra *extras) {
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *k, *v;
        if (items[j].extra >= 0) {
            k = extras[items[j].extra].ks;
            Py_INCREF(k);
        } else {
            k = utf8_str(items[j].k, items[j].kl);
            if (k == NULL) { Py_DECREF(d); return NULL; }
        }
        if (items[j].extra >= 0) {
            v = extras[items[j].extra].vs;
            Py_INCREF(v);
        } else {
            v = utf8_str(items[j].v, items[j].vl);
            if (v == NULL) { Py_DECREF(k); Py_DECREF(d); return NULL; }
        }
        int rc = PyDict_SetItem(d, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (rc < 0) { Py_DECREF(d); return NULL; }
    }
    return d;
}

/* the properties text of ``count`` items at ``w``: name 0x01 value, items joined by 0x02 (no trailing
 * separator, as Java's messageProperties2String for the stored record) */
static void write_items(unsigned char *w, const Item *items, Py_ssize_t count) {
    for (Py_ssize_t j = 0; j < count; j++) {
        if (j) *w++ = 2;
        memcpy(w, items[j].k, (size_t)items[j].kl);
        w += items[j].kl;
        *w++ = 1;
        memcpy(w, items[j].v, (size_t)items[j].vl);
        w += items[j].vl;
    }
}

static PyObject *encode_batch(PyObject *self, PyObject *args) {
    Py_buffer body, topic, born, store;
    PyObject *extra_t;
    int queue_id, sys_flag, reconsume;
    long long born_ts, max_message_size, file_size;
    if (!PyArg_ParseTuple(args, "y*y*O!iiLy*y*iLL", &body, &topic, &PyTuple_Type, &extra_t, &queue_id, &sys_flag,
                          &born_ts, &born, &store, &reconsume, &max_message_size, &file_size))
        return NULL;
    PyObject *result = NULL, *records = NULL, *sizes = NULL, *tags = NULL, *dicts = NULL;
    Out out = {NULL, 0, 0};
    Extra *extras = NULL;
    Item *items = NULL;
    Py_ssize_t nextra = PyTuple_GET_SIZE(extra_t);

    if (topic.len < 1 || topic.len > 127 || (born.len != 8 && born.len != 20) || (store.len != 8 && store.len != 20))
        goto decline;
    extras = PyMem_Calloc((size_t)(nextra ? nextra : 1), sizeof(Extra));
    items = PyMem_Calloc((size_t)(MAX_ITEMS + nextra), sizeof(Item));
    if (extras == NULL || items == NULL) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t e = 0; e < nextra; e++) {
        PyObject *t = PyTuple_GET_ITEM(extra_t, e);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4 || !PyBytes_Check(PyTuple_GET_ITEM(t, 0)) ||
            !PyBytes_Check(PyTuple_GET_ITEM(t, 1)) || !PyUnicode_Check(PyTuple_GET_ITEM(t, 2)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(t, 3))) {
            PyErr_SetString(PyExc_TypeError, "extra items must be (key bytes, value bytes, key str, value str)");
            goto fail;
        }
        extras[e].k = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(t, 0));
        extras[e].kl = PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, 0));
        extras[e].v = (const unsigned char *)PyBytes_AS_STRING(PyTuple_GET_ITEM(t, 1));
        extras[e].vl = PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, 1));
        extras[e].ks = PyTuple_GET_ITEM(t, 2);
        extras[e].vs = PyTuple_GET_ITEM(t, 3);
    }
    if ((sizes = PyList_New(0)) == NULL || (tags = PyList_New(0)) == NULL || (dicts = PyList_New(0)) == NULL) goto fail;

    const unsigned char *b = (const unsigned char *)body.buf;
    Py_ssize_t end = body.len, pos = 0;
    long long total_size = 0;
    if (end == 0) goto decline;
    while (pos < end) {
        if (end - pos < 20) goto decline;
        int32_t total = get_i32(b + pos);
        int32_t flag = get_i32(b + pos + 12);
        int32_t body_len = get_i32(b + pos + 16);
        if (body_len < 0 || (long long)body_len > (long long)(end - pos - 22)) goto decline;
        Py_ssize_t p = pos + 20 + body_len;
        int16_t props_len = get_i16(b + p);
        p += 2;
        if (props_len < 0 || props_len > end - p) goto decline;
        if ((long long)total != 22LL + body_len + props_len) goto decline;
        const unsigned char *ptext = b + p;
        if (!utf8_valid(ptext, props_len)) goto decline;
        Py_ssize_t count = merge_props(ptext, props_len, extras, nextra, items);
        if (count < 0) goto decline;
        Py_ssize_t plen = count ? count - 1 : 0;
        int32_t tags_code = 0;
        for (Py_ssize_t j = 0; j < count; j++) {
            plen += items[j].kl + 1 + items[j].vl;
            if (items[j].kl == 4 && memcmp(items[j].k, "TAGS", 4) == 0 && items[j].vl > 0)
                tags_code = java_hash_utf8(items[j].v, items[j].vl);
        }
        if (plen > MAX_PROPERTIES_LENGTH || body_len > max_message_size) goto decline;
        long long size = 75LL + born.len + store.len + body_len + topic.len + plen;
        if (size > max_message_size + 32 * 1024 || size + END_FILE_MIN_BLANK_LENGTH > file_size) goto decline;
        total_size += size;
        if (total_size + END_FILE_MIN_BLANK_LENGTH > file_size) goto decline;

        if (out_reserve(&out, (Py_ssize_t)size) < 0) goto fail;
        const unsigned char *mbody = b + pos + 20;
        long long crc = body_crc(mbody, body_len);
        if (crc < 0) goto fail;
        /* queue offset, physical offset, store timestamp and prepared offset 0 (finish_batch) */
        unsigned char *w = write_record_head(out.p + out.len, size, crc, queue_id, flag, 0, 0, sys_flag, born_ts, &born,
                                             0, &store, reconsume, 0, mbody, body_len, topic.buf, topic.len, plen);
        write_items(w, items, count);
        out.len += (Py_ssize_t)size;

        PyObject *o = PyLong_FromLongLong(size);
        if (o == NULL || PyList_Append(sizes, o) < 0) { Py_XDECREF(o); goto fail; }
        Py_DECREF(o);
        o = PyLong_FromLong(tags_code);
        if (o == NULL || PyList_Append(tags, o) < 0) { Py_XDECREF(o); goto fail; }
        Py_DECREF(o);
        o = props_dict(items, count, extras);
        if (o == NULL || PyList_Append(dicts, o) < 0) { Py_XDECREF(o); goto fail; }
        Py_DECREF(o);
        pos = p + props_len;
    }
    records = PyByteArray_FromStringAndSize((const char *)out.p, out.len);
    if (records == NULL) goto fail;
    result = PyTuple_Pack(4, records, sizes, tags, dicts);
    goto fail;  /* clean-up */
decline:
    result = Py_None;
    Py_INCREF(result);
fail:
    Py_XDECREF(records);
    Py_XDECREF(sizes);
    Py_XDECREF(tags);
    Py_XDECREF(dicts);
    PyMem_Free(out.p);
    PyMem_Free(extras);
    PyMem_Free(items);
    PyBuffer_Release(&body);
    PyBuffer_Release(&topic);
    PyBuffer_Release(&born);
    PyBuffer_Release(&store);
    return result;
}

static const char HEX[] = "0123456789ABCDEF";

/* The offsets and store timestamp of the record at r, its consume-queue entry at c (20 bytes) and its
 * offset message id at idp ((store_len + 8) * 2 hex digits); returns idp after the id. */
static Py_UCS1 *finish_record(unsigned char *r, Py_ssize_t born_len, int32_t size, long long tag, uint64_t phy,
                              long long queue_offset, long long now, unsigned char *c, const unsigned char *sh,
                              Py_ssize_t store_len, Py_UCS1 *idp) {
    put_u64(r + 20, (uint64_t)queue_offset);
    put_u64(r + 28, phy);
    put_u64(r + 48 + born_len, (uint64_t)now);
    put_u64(c, phy);
    put_u32(c + 8, (uint32_t)size);
    put_u64(c + 12, (uint64_t)tag);
    for (Py_ssize_t k = 0; k < store_len; k++) {
        *idp++ = (Py_UCS1)HEX[sh[k] >> 4];
        *idp++ = (Py_UCS1)HEX[sh[k] & 15];
    }
    for (int k = 56; k >= 0; k -= 8) {
        unsigned char byte = (unsigned char)(phy >> k);
        *idp++ = (Py_UCS1)HEX[byte >> 4];
        *idp++ = (Py_UCS1)HEX[byte & 15];
    }
    return idp;
}

static PyObject *finish_batch(PyObject *self, PyObject *args) {
    Py_buffer rec, store;
    PyObject *tags;
    Py_ssize_t born_len;
    long long phy0, q0, now;
    if (!PyArg_ParseTuple(args, "w*O!y*nLLL", &rec, &PyList_Type, &tags, &store, &born_len, &phy0, &q0, &now))
        return NULL;
    PyObject *result = NULL, *cq = NULL, *ids = NULL, *phys = NULL;
    Py_ssize_t n = PyList_GET_SIZE(tags);
    Py_ssize_t id_len = (store.len + 8) * 2;
    if ((born_len != 8 && born_len != 20) || store.len > 64) {
        PyErr_SetString(PyExc_ValueError, "bad host lengths");
        goto done;
    }
    cq = PyBytes_FromStringAndSize(NULL, n * 20);
    ids = PyUnicode_New(n ? n * id_len + n - 1 : 0, 127);
    phys = PyList_New(n);
    if (cq == NULL || ids == NULL || phys == NULL) goto done;
    unsigned char *c = (unsigned char *)PyBytes_AS_STRING(cq);
    Py_UCS1 *idp = PyUnicode_1BYTE_DATA(ids);
    unsigned char *r = (unsigned char *)rec.buf;
    Py_ssize_t pos = 0;
    const unsigned char *sh = (const unsigned char *)store.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (rec.len - pos < 64 + born_len) {
            PyErr_SetString(PyExc_ValueError, "records shorter than their sizes");
            goto done;
        }
        int32_t size = get_i32(r + pos);
        if (size < 64 + born_len || size > rec.len - pos) {
            PyErr_SetString(PyExc_ValueError, "records shorter than their sizes");
            goto done;
        }
        long long tag = PyLong_AsLongLong(PyList_GET_ITEM(tags, i));
        if (tag == -1 && PyErr_Occurred()) goto done;
        uint64_t phy = (uint64_t)phy0 + (uint64_t)pos;
        if (i) *idp++ = ',';
        idp = finish_record(r + pos, born_len, size, tag, phy, q0 + i, now, c, sh, store.len, idp);
        c += 20;
        PyObject *o = PyLong_FromLongLong((long long)phy);
        if (o == NULL) goto done;
        PyList_SET_ITEM(phys, i, o);
        pos += size;
    }
    if (pos != rec.len) {
        PyErr_SetString(PyExc_ValueError, "records longer than their sizes");
        goto done;
    }
    result = PyTuple_Pack(3, cq, ids, phys);
done:
    Py_XDECREF(cq);
    Py_XDECREF(ids);
    Py_XDECREF(phys);
    PyBuffer_Release(&rec);
    PyBuffer_Release(&store);
    return result;
}

/* place_single(record, tags_code, store_host, born_host_len, physical_offset, queue_offset, now,
 *              commit_log_map, commit_log_pos, consume_queue_map, consume_queue_pos)
 * One record from encode_single written into its CommitLog file's mapping at commit_log_pos with its
 * offsets and store timestamp (as finish_batch), its consume-queue entry into the queue file's mapping at
 * consume_queue_pos; returns its offset message id. ValueError (nothing written) when the record's size
 * field is not its length, a host length is wrong or either write would leave its mapping. Twin:
 * batch_records.place_single_py. */
static PyObject *place_single(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer rec, store, cl, cq;
    long long tag, phy, q, now;
    Py_ssize_t born_len, cl_pos, cq_pos;
    if (!PyArg_ParseTuple(args, "y*Ly*nLLLw*nw*n", &rec, &tag, &store, &born_len, &phy, &q, &now, &cl, &cl_pos, &cq,
                          &cq_pos))
        return NULL;
    PyObject *result = NULL;
    if ((born_len != 8 && born_len != 20) || store.len > 64) {
        PyErr_SetString(PyExc_ValueError, "bad host lengths");
        goto done;
    }
    if (rec.len < 64 + born_len || rec.len > INT32_MAX || get_i32(rec.buf) != rec.len) {
        PyErr_SetString(PyExc_ValueError, "record length is not its size field");
        goto done;
    }
    if (cl_pos < 0 || cl_pos > cl.len - rec.len || cq_pos < 0 || cq_pos > cq.len - 20) {
        PyErr_SetString(PyExc_ValueError, "record or entry beyond its file");
        goto done;
    }
    result = PyUnicode_New((store.len + 8) * 2, 127);
    if (result == NULL) goto done;
    unsigned char *r = (unsigned char *)cl.buf + cl_pos;
    memcpy(r, rec.buf, (size_t)rec.len);
    finish_record(r, born_len, (int32_t)rec.len, tag, (uint64_t)phy, q, now, (unsigned char *)cq.buf + cq_pos,
                  store.buf, store.len, PyUnicode_1BYTE_DATA(result));
done:
    PyBuffer_Release(&rec);
    PyBuffer_Release(&store);
    PyBuffer_Release(&cl);
    PyBuffer_Release(&cq);
    return result;
}

/* An int argument as a long long within [lo, hi]; 0 (no exception set) when it is not one. */
static int int_in(PyObject *o, long long lo, long long hi, long long *out) {
    if (!PyLong_Check(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

/* encode_single(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host,
 *               reconsume_times, max_message_size, file_size)
 * The record of one plain single send (MessageStore.put_plain) with queue offset, physical offset and
 * store timestamp left 0 for finish_batch: `properties` is the dict stored (encode_properties order,
 * None values skipped), the checks are CommitLog._check's. Returns (record bytearray, size, tags code),
 * or None when anything is unusual (a key or value that is not a str, text that is not UTF-8 encodable,
 * an int field out of its range, a record the store would refuse): the caller then takes the
 * InnerMessage path, which gives the exact result. Twin: batch_records.encode_single_py. */
static PyObject *encode_single(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 12 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "encode_single(topic: str, body, properties: dict, queue_id, flag, sys_flag, "
                                         "born_timestamp, born_host, store_host, reconsume_times, max_message_size, "
                                         "file_size)");
        return NULL;
    }
    PyObject *props = args[2];
    long long queue_id, flag, sys_flag, born_ts, reconsume, max_message_size, file_size;
    if (!int_in(args[3], INT32_MIN, INT32_MAX, &queue_id) || !int_in(args[4], INT32_MIN, INT32_MAX, &flag) ||
        !int_in(args[5], INT32_MIN, INT32_MAX, &sys_flag) || !int_in(args[6], INT64_MIN, INT64_MAX, &born_ts) ||
        !int_in(args[9], INT32_MIN, INT32_MAX, &reconsume) ||
        !int_in(args[10], 0, INT32_MAX, &max_message_size) || !int_in(args[11], 0, INT64_MAX, &file_size))
        Py_RETURN_NONE;
    if (!PyUnicode_CheckExact(args[0])) Py_RETURN_NONE;
    Py_ssize_t topic_len;
    const char *topic = PyUnicode_AsUTF8AndSize(args[0], &topic_len);
    if (topic == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (topic_len < 1 || topic_len > 127) Py_RETURN_NONE;
    Py_buffer body = {0}, born = {0}, store = {0};
    PyObject *result = NULL, *record = NULL;
    Item *items = NULL;
    if (PyObject_GetBuffer(args[1], &body, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[7], &born, PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(args[8], &store, PyBUF_SIMPLE) < 0) goto done;
    if ((born.len != 8 && born.len != 20) || (store.len != 8 && store.len != 20)) goto decline;
    /* the properties text's items (UTF-8 kept by the str objects, which the dict holds) */
    Py_ssize_t nprops = PyDict_GET_SIZE(props), count = 0, plen = 0, pos = 0;
    items = PyMem_Calloc((size_t)(nprops ? nprops : 1), sizeof(Item));
    if (items == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t tags_code = 0;
    PyObject *k, *v;
    while (PyDict_Next(props, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k)) goto decline;
        if (v == Py_None) continue;
        if (count >= nprops || !PyUnicode_CheckExact(v)) goto decline;
        Item *it = &items[count];
        it->k = (const unsigned char *)PyUnicode_AsUTF8AndSize(k, &it->kl);
        if (it->k == NULL) goto decline_clear;
        it->v = (const unsigned char *)PyUnicode_AsUTF8AndSize(v, &it->vl);
        if (it->v == NULL) goto decline_clear;
        if (it->kl == 4 && memcmp(it->k, "TAGS", 4) == 0 && it->vl > 0) tags_code = java_hash_utf8(it->v, it->vl);
        plen += (count ? 1 : 0) + it->kl + 1 + it->vl;
        count++;
        if (plen > MAX_PROPERTIES_LENGTH) goto decline;
    }
    if (body.len > max_message_size) goto decline;
    long long size = 75LL + born.len + store.len + body.len + topic_len + plen;
    if (size > max_message_size + 32 * 1024 || size + END_FILE_MIN_BLANK_LENGTH > file_size) goto decline;
    long long crc = body_crc((const unsigned char *)body.buf, body.len);
    if (crc < 0) goto done;
    record = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)size);
    if (record == NULL) goto done;
    unsigned char *w = write_record_head((unsigned char *)PyByteArray_AS_STRING(record), size, crc, queue_id, flag, 0, 0,
                                         sys_flag, born_ts, &born, 0, &store, reconsume, 0, body.buf, body.len,
                                         (const unsigned char *)topic, topic_len, plen);
    write_items(w, items, count);
    result = Py_BuildValue("(OLi)", record, size, (int)tags_code);
    goto done;
decline_clear:
    PyErr_Clear();
decline:
    result = Py_None;
    Py_INCREF(result);
done:
    Py_XDECREF(record);
    PyMem_Free(items);
    if (body.obj) PyBuffer_Release(&body);
    if (born.obj) PyBuffer_Release(&born);
    if (store.obj) PyBuffer_Release(&store);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_single", (PyCFunction)(void (*)(void))encode_single, METH_FASTCALL,
     "encode_single(topic, body, properties, queue_id, flag, sys_flag, born_timestamp, born_host, store_host, "
     "reconsume_times, max_message_size, file_size) -> (record, size, tags_code) | None"},
    {"place_single", place_single, METH_VARARGS,
     "place_single(record, tags_code, store_host, born_host_len, physical_offset, queue_offset, now, commit_log_map, "
     "commit_log_pos, consume_queue_map, consume_queue_pos) -> msg_id"},
    {"encode_batch", encode_batch, METH_VARARGS,
     "encode_batch(body, topic, extra, queue_id, sys_flag, born_timestamp, born_host, store_host, reconsume_times, "
     "max_message_size, file_size) -> (records, sizes, tags_codes, properties) | None"},
    {"finish_batch", finish_batch, METH_VARARGS,
     "finish_batch(records, tags_codes, store_host, born_host_len, physical_offset, queue_offset, now) -> "
     "(consume_queue_entries, msg_ids, physical_offsets)"},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_cbatch_records",
            "C twin of rocketmq_broker.store.batch_records: the records of a batch and of a "
            "plain single send.");

PyMODINIT_FUNC PyInit__cbatch_records(void) {
    if (record_helpers_init() < 0) return NULL;
    return PyModule_Create(&module);
}
