/* Helpers shared by the store's C twins: _ccommit_log.c (beside commit_log.py) and
 * _cbatch_records.c (beside batch_records.py) both write CommitLog records (docs/protocol.md §4.5).
 * Included, not linked (each twin is its own extension module), so everything here is static.
 *
 *   record_helpers_init()   once from each module's init: the CRC table and zlib.crc32
 *   body_crc                the record's BODYCRC (zlib's CRC32 & 0x7FFFFFFF)
 *   get_i32 / get_i16 / put_u32 / put_u64   big-endian integers
 *   write_record_head       a record up to its properties text
 *   TWIN_MODULE             the module definition
 */
#ifndef ROCKETMQ_BROKER_CRECORD_H
#define ROCKETMQ_BROKER_CRECORD_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Helpers the compiler inlines or not as it sees fit (``static inline`` would push it to inline
 * the larger ones too); ``unused`` keeps a twin that does not call one free of warnings. */
#if defined(__GNUC__) || defined(__clang__)
#define RECORD_HELPER static __attribute__((unused))
#else
#define RECORD_HELPER static
#endif

#define MESSAGE_MAGIC_CODE 0xDAA320A7u
#define MAX_PROPERTIES_LENGTH 32767
#define END_FILE_MIN_BLANK_LENGTH 8

/* ---- CRC32 (zlib's, reflected 0xEDB88320), slice by 8 ------------------------------------- */
static uint32_t crc_table[8][256];

RECORD_HELPER void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int k = 1; k < 8; k++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[k][n] = c;
        }
    }
}

RECORD_HELPER uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF] ^
            crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* Bodies from ZLIB_CRC_MIN bytes on take zlib.crc32 (the twin's own function, about twice as fast as
 * the table loop on long input); shorter ones the table loop (no call overhead). */
#ifndef ZLIB_CRC_MIN
#define ZLIB_CRC_MIN 1024
#endif
static PyObject *ZlibCrc32;

/* crc32(body) & 0x7FFFFFFF as the record's BODYCRC, or -1 with an exception set. */
RECORD_HELPER long long body_crc(const unsigned char *p, Py_ssize_t n) {
    if (n < ZLIB_CRC_MIN) return (long long)(crc32_of(p, n) & 0x7FFFFFFFu);
    PyObject *view = PyMemoryView_FromMemory((char *)p, n, PyBUF_READ);
    if (view == NULL) return -1;
    PyObject *r = PyObject_CallOneArg(ZlibCrc32, view);
    Py_DECREF(view);
    if (r == NULL) return -1;
    unsigned long c = PyLong_AsUnsignedLong(r);
    Py_DECREF(r);
    if (c == (unsigned long)-1 && PyErr_Occurred()) return -1;
    return (long long)(c & 0x7FFFFFFFul);
}

/* ---- big-endian helpers --------------------------------------------------------------------- */
static inline int32_t get_i32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3]);
}
static inline int16_t get_i16(const unsigned char *p) { return (int16_t)((uint16_t)p[0] << 8 | p[1]); }
static inline void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16); p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)(v >> 32));
    put_u32(p + 4, (uint32_t)v);
}

/* The section 4.5 record up to its properties: everything but the properties text, which the caller
 * writes after the returned pointer (plen bytes). `size` is the whole record's length; `crc` the
 * body's BODYCRC. */
RECORD_HELPER unsigned char *write_record_head(unsigned char *w, long long size, long long crc, long long queue_id,
                                        long long flag, long long queue_offset, long long phy, long long sys_flag,
                                        long long born_ts, const Py_buffer *born, long long store_ts,
                                        const Py_buffer *store, long long reconsume, long long prepared,
                                        const unsigned char *body, Py_ssize_t body_len, const unsigned char *topic,
                                        Py_ssize_t topic_len, Py_ssize_t plen) {
    put_u32(w, (uint32_t)size);
    put_u32(w + 4, MESSAGE_MAGIC_CODE);
    put_u32(w + 8, (uint32_t)crc);
    put_u32(w + 12, (uint32_t)queue_id);
    put_u32(w + 16, (uint32_t)flag);
    put_u64(w + 20, (uint64_t)queue_offset);
    put_u64(w + 28, (uint64_t)phy);
    put_u32(w + 36, (uint32_t)sys_flag);
    put_u64(w + 40, (uint64_t)born_ts);
    w += 48;
    memcpy(w, born->buf, (size_t)born->len);
    w += born->len;
    put_u64(w, (uint64_t)store_ts);
    w += 8;
    memcpy(w, store->buf, (size_t)store->len);
    w += store->len;
    put_u32(w, (uint32_t)reconsume);
    put_u64(w + 4, (uint64_t)prepared);
    put_u32(w + 12, (uint32_t)body_len);
    w += 16;
    memcpy(w, body, (size_t)body_len);
    w += body_len;
    *w++ = (unsigned char)topic_len;
    memcpy(w, topic, (size_t)topic_len);
    w += topic_len;
    *w++ = (unsigned char)(plen >> 8);
    *w++ = (unsigned char)plen;
    return w;
}

/* The CRC table and zlib.crc32 (body_crc's); 0, or -1 with an exception set. */
RECORD_HELPER int record_helpers_init(void) {
    crc_init();
    if (ZlibCrc32 == NULL) {
        PyObject *z = PyImport_ImportModule("zlib");
        if (z == NULL) return -1;
        ZlibCrc32 = PyObject_GetAttrString(z, "crc32");
        Py_DECREF(z);
        if (ZlibCrc32 == NULL) return -1;
    }
    return 0;
}

/* ---- the module ---------------------------------------------------------------------------- */

/* ``static struct PyModuleDef module`` of a twin whose method table is ``methods`` */
#define TWIN_MODULE(name, doc)                                                                     \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, name, doc, -1, methods, NULL, NULL, NULL, NULL}

#endif /* ROCKETMQ_BROKER_CRECORD_H */
