/* Helpers shared by the SDK's C twins (each ``_c<module>.c`` beside the ``<module>.py`` it
 * accelerates: remoting/_ccommand.c, protocol/_cmessage_codec.c, producer/_cprepare.c ...).
 * Included, not linked: every twin is its own extension module, so everything here is
 * static (``HELPER`` or ``static inline``) and a twin that does not use a helper pays nothing for it.
 *
 *   FALLBACK / FAILED    the result codes of the twins' internal steps
 *   be32 / be64 / put_be32   big-endian integers
 *   Writer               a growable output buffer on the stack (w_init, w_reserve, w_put, W_LIT, w_long)
 *   utf8_of, w_json_str  UTF-8 of a str; a JSON string as json.dumps(ensure_ascii=False) writes it
 *   str_of_utf8          a str from UTF-8 bytes (NULL without an exception when they are not UTF-8)
 *   slot_offsets, put_slot   filling the __slots__ of a fresh object directly
 *   TWIN_MODULE          the module definition
 */
#ifndef ROCKETMQ_SDK_CHELPERS_H
#define ROCKETMQ_SDK_CHELPERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

/* Helpers the compiler inlines or not as it sees fit (``static inline`` would push it to inline
 * the larger ones too); ``unused`` keeps a twin that does not call one free of warnings. */
#if defined(__GNUC__) || defined(__clang__)
#define HELPER static __attribute__((unused))
#else
#define HELPER static
#endif

#define FALLBACK 1 /* not handled here: let Python decide */
#define FAILED -1  /* a Python exception is set */

/* ---- big-endian integers ------------------------------------------------------------------ */

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

static inline void put_be32(char *o, uint32_t v) {
    o[0] = (char)(v >> 24);
    o[1] = (char)(v >> 16);
    o[2] = (char)(v >> 8);
    o[3] = (char)v;
}

/* ---- Writer: a growable output buffer, inline up to 1 KiB ----------------------------------- */

typedef struct {
    char *buf;
    Py_ssize_t len, cap;
    char small[1024];
} Writer;

/* an empty writer on its inline buffer, ``reserved`` bytes (a frame's length words) left to fill later */
static inline void w_init(Writer *w, Py_ssize_t reserved) {
    w->buf = w->small;
    w->len = reserved;
    w->cap = sizeof w->small;
}

static inline void w_free(Writer *w) {
    if (w->buf != w->small)
        PyMem_Free(w->buf);
}

HELPER int w_reserve(Writer *w, Py_ssize_t extra) {
    if (w->len + extra <= w->cap)
        return 0;
    Py_ssize_t cap = w->cap * 2;
    while (cap < w->len + extra)
        cap *= 2;
    char *nb;
    if (w->buf == w->small) {
        nb = PyMem_Malloc(cap);
        if (nb != NULL)
            memcpy(nb, w->buf, w->len);
    } else {
        nb = PyMem_Realloc(w->buf, cap);
    }
    if (nb == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = nb;
    w->cap = cap;
    return 0;
}

static inline int w_put(Writer *w, const char *s, Py_ssize_t n) {
    if (w_reserve(w, n) < 0)
        return -1;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    return 0;
}

#define W_LIT(w, lit) w_put((w), (lit), (Py_ssize_t)sizeof(lit) - 1)

HELPER int w_long(Writer *w, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    return w_put(w, tmp, n);
}

/* ---- text ------------------------------------------------------------------------------------ */

/* The UTF-8 form of a str; NULL with *r set to FALLBACK when it cannot be encoded (lone
 * surrogates: the Python path raises UnicodeEncodeError) or to FAILED (another error). */
HELPER const char *utf8_of(PyObject *s, Py_ssize_t *n, int *r) {
    const char *u = PyUnicode_AsUTF8AndSize(s, n);
    if (u == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            *r = FALLBACK;
        } else {
            *r = FAILED;
        }
    }
    return u;
}

/* A JSON string as json.dumps(ensure_ascii=False) writes it, in UTF-8. FALLBACK when the str
 * cannot be encoded (lone surrogates: the Python path raises). */
HELPER int w_json_str(Writer *w, PyObject *s) {
    Py_ssize_t n;
    int r = 0;
    const char *u = utf8_of(s, &n, &r);
    if (u == NULL)
        return r;
    if (w_reserve(w, n * 6 + 2) < 0)
        return FAILED;
    static const char hex[] = "0123456789abcdef";
    char *o = w->buf + w->len;
    *o++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)u[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') {
            *o++ = (char)ch;
            continue;
        }
        *o++ = '\\';
        switch (ch) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        default:
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[ch >> 4];
            *o++ = hex[ch & 15];
        }
    }
    *o++ = '"';
    w->len = o - w->buf;
    return 0;
}

/* A str of n bytes at s: ``ascii`` says they are all below 0x80 (copied as they are), else they are
 * decoded as strict UTF-8. NULL without an exception set when they are not UTF-8 (the Python path
 * reports it), NULL with one on another error. */
HELPER PyObject *str_of_utf8(const char *s, Py_ssize_t n, int ascii) {
    if (ascii) {
        PyObject *u = PyUnicode_New(n, 127);
        if (u == NULL)
            return NULL;
        memcpy(PyUnicode_DATA(u), s, n);
        return u;
    }
    PyObject *u = PyUnicode_DecodeUTF8(s, n, NULL);
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return u;
}

/* ---- filling a fresh object's __slots__ -------------------------------------------------------- */

/* the T_OBJECT_EX slot offsets of ``names`` (at most 32) in ``cls`` (a class with __slots__ only)
   into ``offsets``; -1 and a TypeError, ``offsets`` untouched, if one is not such a slot */
HELPER int slot_offsets(PyObject *cls, const char *const *names, Py_ssize_t *offsets) {
    Py_ssize_t found[32];
    int i;
    if (((PyTypeObject *)cls)->tp_dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s must have __slots__ only", ((PyTypeObject *)cls)->tp_name);
        return -1;
    }
    for (i = 0; names[i] != NULL; i++) {
        if (i == 32) {
            PyErr_SetString(PyExc_SystemError, "slot_offsets: too many names");
            return -1;
        }
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (d == NULL)
            return -1;
        int ok = Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX;
        if (ok)
            found[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s is not a slot", names[i]);
            return -1;
        }
    }
    memcpy(offsets, found, (size_t)i * sizeof(Py_ssize_t));
    return 0;
}

/* stores ``value`` (stolen) in the slot at ``offset`` of a fresh object (the slot must be empty) */
static inline void put_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
    *(PyObject **)((char *)obj + offset) = value;
}

/* ---- the module ---------------------------------------------------------------------------- */

/* one item of a properties string (docs/protocol.md §4.1) starting at p[i]: returns the item's end (its \x02,
 * or n); *sep is the item's first \x01, or the end when it has none */
HELPER Py_ssize_t prop_item(const unsigned char *p, Py_ssize_t n, Py_ssize_t i, Py_ssize_t *sep) {
    Py_ssize_t j = i;
    while (j < n && p[j] != 2)
        j++;
    Py_ssize_t s = i;
    while (s < j && p[s] != 1)
        s++;
    *sep = s;
    return j;
}

/* ``static struct PyModuleDef module`` of a twin whose method table is ``methods`` */
#define TWIN_MODULE(name, doc)                                                                     \
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, name, doc, -1, methods, NULL, NULL, NULL, NULL}

#endif /* ROCKETMQ_SDK_CHELPERS_H */
