/* rocketmq_broker.store._cindex_file: C twin of the IndexFile write path of
 * broker-reference/store/index_file.py (pure-Python twin: index_key_hash, IndexFile._put_keys_py).
 *
 *   key_hash(key: str) -> int
 *       abs(Java key.hashCode()) over UTF-16 code units, Integer.MIN_VALUE -> 0.  A str holding a
 *       lone surrogate code point is encoded with "utf-16-be" (strict) like the Python twin, so it
 *       raises the same UnicodeEncodeError.
 *
 *   put_keys(buf, hash_slot_num, index_num, index_count, hash_slot_count, begin_phy_offset,
 *            begin_timestamp, items) -> (n, index_count, hash_slot_count, begin_phy_offset,
 *                                        begin_timestamp, end_phy_offset, end_timestamp) | None
 *       Writes up to index_num - index_count of items [(key, phy_offset, store_timestamp), ...]
 *       into the writable buffer buf (the file's mmap): entries, slots and, when n > 0, the 40-byte
 *       header, byte for byte as the Python twin; returns the new counters.  Returns None, having
 *       written nothing, for anything unusual (not a list/tuple of 3-tuples (str, int, int), values
 *       out of range, a buffer too small, a key with a surrogate code point) and when there is
 *       nothing to write (no items, file full): the caller then runs the Python twin, which
 *       answers 0 or raises what it raises.
 *
 * CPython C API only (3.11+).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define INDEX_HEADER_SIZE 40
#define HASH_SLOT_SIZE 4
#define INDEX_SIZE 20
/* timestamps and offsets beyond +-2^62 go to the Python twin (keeps ts - begin_ts in int64) */
#define TS_LIMIT ((int64_t)1 << 62)
#define STACK_HASHES 64

/* Java hashCode (mod 2^32) of the UTF-16 code units of s: 0 = done; -1 (no error set) when s
 * holds a surrogate code point (the caller decides); -2 with an error set on failure. */
static int
java_hash_u32(PyObject *s, uint32_t *out)
{
    Py_ssize_t n, i;
    int kind;
    const void *data;
    uint32_t h = 0;

#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) /* legacy (wstr) strings exist up to 3.11 */
        return -2;
#endif
    n = PyUnicode_GET_LENGTH(s);
    kind = PyUnicode_KIND(s);
    data = PyUnicode_DATA(s);

    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (i = 0; i < n; i++)
            h = 31u * h + p[i];
    }
    else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (i = 0; i < n; i++) {
            Py_UCS2 c = p[i];
            if (c >= 0xD800 && c <= 0xDFFF)
                return -1;
            h = 31u * h + c;
        }
    }
    else {
        const Py_UCS4 *p = (const Py_UCS4 *)data;
        for (i = 0; i < n; i++) {
            Py_UCS4 c = p[i];
            if (c >= 0xD800 && c <= 0xDFFF)
                return -1;
            if (c >= 0x10000) {
                Py_UCS4 v = c - 0x10000;
                h = 31u * h + (0xD800u + (v >> 10));
                h = 31u * h + (0xDC00u + (v & 0x3FFu));
            }
            else {
                h = 31u * h + c;
            }
        }
    }
    *out = h;
    return 0;
}

/* abs(int32(h)) with Integer.MIN_VALUE -> 0 (RocketMQ's IndexFile.indexKeyHashMethod). */
static int32_t
abs_hash(uint32_t h)
{
    int64_t s = (h & 0x80000000u) ? (int64_t)h - ((int64_t)1 << 32) : (int64_t)h;
    if (s == -((int64_t)1 << 31))
        return 0;
    return (int32_t)(s < 0 ? -s : s);
}

/* The Python twin's route for a str with surrogate code points: hash its "utf-16-be" encoding
 * (which raises UnicodeEncodeError for a lone surrogate). */
static int
java_hash_via_utf16(PyObject *s, uint32_t *out)
{
    PyObject *b = PyUnicode_AsEncodedString(s, "utf-16-be", "strict");
    if (b == NULL)
        return -1;
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(b);
    Py_ssize_t n = PyBytes_GET_SIZE(b);
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i + 1 < n; i += 2)
        h = 31u * h + (((uint32_t)p[i] << 8) | p[i + 1]);
    Py_DECREF(b);
    *out = h;
    return 0;
}

static PyObject *
key_hash(PyObject *Py_UNUSED(module), PyObject *key)
{
    uint32_t h;
    int rc;
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "index key must be str, not %.100s", Py_TYPE(key)->tp_name);
        return NULL;
    }
    rc = java_hash_u32(key, &h);
    if (rc == -2 || (rc == -1 && java_hash_via_utf16(key, &h) < 0))
        return NULL;
    return PyLong_FromLong((long)abs_hash(h));
}

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline void
put_be64(unsigned char *p, uint64_t v)
{
    put_be32(p, (uint32_t)(v >> 32));
    put_be32(p + 4, (uint32_t)v);
}

static inline int32_t
get_be32(const unsigned char *p)
{
    uint32_t v = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
    return (v & 0x80000000u) ? (int32_t)(-(int64_t)(((~v) & 0x7FFFFFFFu)) - 1) : (int32_t)v;
}

/* An int argument as int64 within [lo, hi]; 0 = fine, 1 = not an int or out of range (no error
 * set), -1 = error set. */
static int
as_i64(PyObject *o, int64_t lo, int64_t hi, int64_t *out)
{
    int overflow = 0;
    long long v;
    if (!PyLong_Check(o))
        return 1;
    v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow || v < lo || v > hi)
        return 1;
    *out = (int64_t)v;
    return 0;
}

/* floor((a - b) / 1000) clamped to [0, INT32_MAX], as the Python twin; |a|, |b| <= 2^62. */
static int32_t
time_diff(int64_t ts, int64_t begin_ts)
{
    int64_t d, q;
    if (begin_ts <= 0)
        return 0;
    d = ts - begin_ts;
    q = d / 1000;
    if (d % 1000 != 0 && d < 0)
        q -= 1;
    if (q < 0)
        return 0;
    if (q > INT32_MAX)
        return INT32_MAX;
    return (int32_t)q;
}

static PyObject *
put_keys(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    int64_t slots, index_num, count, slot_count, begin_phy, begin_ts;
    int64_t end_phy = 0, end_ts = 0;
    PyObject *seq = NULL, *result = NULL;
    uint32_t stack_hashes[STACK_HASHES];
    uint32_t *hashes = stack_hashes;
    int64_t stack_phy[STACK_HASHES], stack_ts[STACK_HASHES];
    int64_t *phys = stack_phy, *tss = stack_ts;
    Py_ssize_t n, i;
    int rc;

    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "put_keys() takes 8 arguments");
        return NULL;
    }
    /* geometry and counters: anything out of the range the twin can pack -> the twin */
    if ((rc = as_i64(args[1], 1, INT32_MAX, &slots)) != 0
        || (rc = as_i64(args[2], 1, INT32_MAX, &index_num)) != 0
        || (rc = as_i64(args[3], 1, INT32_MAX, &count)) != 0
        || (rc = as_i64(args[4], INT32_MIN, INT32_MAX, &slot_count)) != 0
        || (rc = as_i64(args[5], INT64_MIN, INT64_MAX, &begin_phy)) != 0
        || (rc = as_i64(args[6], -TS_LIMIT, TS_LIMIT, &begin_ts)) != 0) {
        if (rc < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if (!PyList_CheckExact(args[7]) && !PyTuple_CheckExact(args[7]))
        Py_RETURN_NONE;
    seq = args[7];
    n = PySequence_Fast_GET_SIZE(seq);
    if (n == 0 || count >= index_num)
        Py_RETURN_NONE; /* nothing to write (empty batch or full file): the twin answers 0 */
    if (n > index_num - count)
        n = (Py_ssize_t)(index_num - count);
    if (slot_count > (int64_t)INT32_MAX - n)
        Py_RETURN_NONE;

    if (n > STACK_HASHES) {
        hashes = PyMem_Malloc((size_t)n * sizeof(uint32_t));
        phys = PyMem_Malloc((size_t)n * sizeof(int64_t));
        tss = PyMem_Malloc((size_t)n * sizeof(int64_t));
        if (hashes == NULL || phys == NULL || tss == NULL) {
            PyErr_NoMemory();
            goto done;
        }
    }
    /* pass 1: validate and hash everything before writing a byte (no Python code runs here) */
    for (i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *key;
        uint32_t h;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3)
            goto fallback;
        key = PyTuple_GET_ITEM(item, 0);
        if (!PyUnicode_Check(key))
            goto fallback;
        rc = java_hash_u32(key, &h);
        if (rc == -2)
            goto done;
        if (rc == -1)
            goto fallback;
        hashes[i] = (uint32_t)abs_hash(h);
        if ((rc = as_i64(PyTuple_GET_ITEM(item, 1), INT64_MIN, INT64_MAX, &phys[i])) != 0
            || (rc = as_i64(PyTuple_GET_ITEM(item, 2), -TS_LIMIT, TS_LIMIT, &tss[i])) != 0) {
            if (rc < 0)
                goto done;
            goto fallback;
        }
    }

    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        PyErr_Clear();
        goto fallback;
    }
    {
        /* bounds: the slot table and every entry written lie inside the buffer */
        int64_t entries_base = INDEX_HEADER_SIZE + slots * HASH_SLOT_SIZE;
        int64_t last_end = entries_base + (count + n) * INDEX_SIZE;
        unsigned char *buf = (unsigned char *)view.buf;
        int64_t new_slots = 0;
        if (view.len < 0 || last_end > (int64_t)view.len) {
            PyBuffer_Release(&view);
            goto fallback;
        }
        for (i = 0; i < n; i++) {
            uint32_t kh = hashes[i];
            int64_t slot_pos = INDEX_HEADER_SIZE + (int64_t)(kh % (uint32_t)slots) * HASH_SLOT_SIZE;
            int64_t slot_value = get_be32(buf + slot_pos);
            unsigned char *e;
            if (slot_value <= 0 || slot_value > count) {
                slot_value = 0;
                new_slots++;
            }
            if (count <= 1) {
                begin_phy = phys[i];
                begin_ts = tss[i];
            }
            e = buf + entries_base + count * INDEX_SIZE;
            put_be32(e, kh);
            put_be64(e + 4, (uint64_t)phys[i]);
            put_be32(e + 12, (uint32_t)time_diff(tss[i], begin_ts));
            put_be32(e + 16, (uint32_t)slot_value);
            put_be32(buf + slot_pos, (uint32_t)count);
            count++;
        }
        slot_count += new_slots;
        end_phy = phys[n - 1];
        end_ts = tss[n - 1];
        put_be64(buf, (uint64_t)begin_ts);
        put_be64(buf + 8, (uint64_t)end_ts);
        put_be64(buf + 16, (uint64_t)begin_phy);
        put_be64(buf + 24, (uint64_t)end_phy);
        put_be32(buf + 32, (uint32_t)slot_count);
        put_be32(buf + 36, (uint32_t)count);
        PyBuffer_Release(&view);
    }
    result = Py_BuildValue("(nLLLLLL)", n, (long long)count, (long long)slot_count,
                           (long long)begin_phy, (long long)begin_ts, (long long)end_phy,
                           (long long)end_ts);
    goto done;

fallback:
    result = Py_NewRef(Py_None);
done:
    if (hashes != stack_hashes) {
        PyMem_Free(hashes);
        PyMem_Free(phys);
        PyMem_Free(tss);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"key_hash", (PyCFunction)key_hash, METH_O,
     "key_hash(key: str) -> int: abs(Java key.hashCode()), Integer.MIN_VALUE -> 0."},
    {"put_keys", (PyCFunction)(void (*)(void))put_keys, METH_FASTCALL,
     "put_keys(buf, hash_slot_num, index_num, index_count, hash_slot_count, begin_phy_offset, "
     "begin_timestamp, items) -> (n, index_count, hash_slot_count, begin_phy_offset, "
     "begin_timestamp, end_phy_offset, end_timestamp) or None (use the Python twin)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_cindex_file",
    "C twin of the IndexFile write path (index_key_hash, IndexFile.put_keys).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__cindex_file(void)
{
    return PyModule_Create(&moduledef);
}
