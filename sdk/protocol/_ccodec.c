/* Optional C accelerator of the remoting frame codec (rocketmq_sdk.protocol._ccodec).
 *
 * The pure-Python twin is RemotingCommand.decode / RemotingCommand.encode in
 * sdk/remoting/command.py; it stays the reference. These functions handle the common case
 * only and return None for anything unusual (escapes in JSON strings, floats, nested values,
 * duplicate extFields keys, the ROCKETMQ binary header, malformed frames, non-str values ...):
 * the caller then runs the Python code, which produces the same result or raises the error.
 *
 *   configure(cls, language_by_name, language_names, other)
 *       cls: RemotingCommand; language_by_name: {"JAVA": 0, ...}; language_names: {0: "JAVA", ...};
 *       other: the int OTHER language code.
 *   decode(frame: bytes-like) -> RemotingCommand | None
 *       frame WITHOUT its 4-byte length prefix, JSON header only.
 *   encode(cmd) -> bytes | None
 *       the whole frame (length prefix included) of a JSON-serialised command.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <structmember.h>

static PyObject *command_cls = NULL;      /* RemotingCommand */
static PyObject *language_by_name = NULL; /* dict str -> int */
static PyObject *language_names = NULL;   /* dict int -> str */
static PyObject *language_other = NULL;   /* int */

static PyObject *s_code, *s_language, *s_version, *s_opaque, *s_flag, *s_remark, *s_ext_fields,
    *s_body, *s_serialize_type, *s_true, *s_false, *s_zero, *zero_int;

/* ------------------------------------------------------------------------------------------ */
/* JSON header decoding                                                                         */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Cur;

#define FALLBACK 1 /* not handled here: let Python decide */
#define FAILED -1  /* a Python exception is set */

static inline void skip_ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A JSON string: sets *s, *n to its raw bytes (quotes excluded), *kind to 0 (ASCII without
 * escapes), 1 (UTF-8 without escapes) or 2 (with escapes, see unescape). FALLBACK on a control
 * character (json.loads refuses it) or an unterminated string. */
static int scan_string(Cur *c, const char **s, Py_ssize_t *n, int *kind) {
    if (c->p >= c->end || *c->p != '"')
        return FALLBACK;
    const unsigned char *start = ++c->p;
    unsigned char hi = 0;
    int esc = 0;
    while (c->p < c->end) {
        unsigned char ch = *c->p;
        if (ch == '"') {
            *s = (const char *)start;
            *n = c->p - start;
            *kind = esc ? 2 : (hi < 0x80 ? 0 : 1);
            c->p++;
            return 0;
        }
        if (ch < 0x20)
            return FALLBACK;
        if (ch == '\\') {
            if (c->end - c->p < 2)
                return FALLBACK;
            esc = 1;
            c->p += 2; /* the escaped character; \uXXXX is checked by unescape */
            continue;
        }
        hi |= ch;
        c->p++;
    }
    return FALLBACK;
}

static int hex4(const char *s, unsigned int *v) {
    unsigned int x = 0;
    for (int i = 0; i < 4; i++) {
        char ch = s[i];
        x <<= 4;
        if (ch >= '0' && ch <= '9')
            x |= ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            x |= ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            x |= ch - 'A' + 10;
        else
            return -1;
    }
    *v = x;
    return 0;
}

/* The str of a JSON string body with escapes; NULL without an exception set when Python must
 * decide (bad escape, lone surrogate, bad UTF-8). The escapes are resolved to UTF-8 and the
 * result decoded strictly, as Python decodes the whole header before parsing it. */
static PyObject *unescape(const char *s, Py_ssize_t n) {
    char small[256] = {0};
    char *out = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc(n);
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t o = 0, i = 0;
    PyObject *result = NULL;
    while (i < n) {
        char ch = s[i];
        if (ch != '\\') {
            out[o++] = ch;
            i++;
            continue;
        }
        if (i + 1 >= n)
            goto done;
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case '"': out[o++] = '"'; continue;
        case '\\': out[o++] = '\\'; continue;
        case '/': out[o++] = '/'; continue;
        case 'b': out[o++] = '\b'; continue;
        case 'f': out[o++] = '\f'; continue;
        case 'n': out[o++] = '\n'; continue;
        case 'r': out[o++] = '\r'; continue;
        case 't': out[o++] = '\t'; continue;
        case 'u': break;
        default: goto done;
        }
        unsigned int cp;
        if (i + 4 > n || hex4(s + i, &cp) < 0)
            goto done;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned int lo;
            if (i + 6 > n || s[i] != '\\' || s[i + 1] != 'u' || hex4(s + i + 2, &lo) < 0 || lo < 0xDC00 ||
                lo > 0xDFFF)
                goto done; /* a lone high surrogate: Python keeps it */
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            goto done;
        }
        /* every escape is at least as long as its UTF-8 form: out never outgrows n */
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    result = PyUnicode_DecodeUTF8(out, o, NULL);
    if (result == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
done:
    if (out != small)
        PyMem_Free(out);
    return result;
}

static PyObject *make_str(const char *s, Py_ssize_t n, int kind) {
    if (kind == 0) {
        PyObject *u = PyUnicode_New(n, 127);
        if (u == NULL)
            return NULL;
        memcpy(PyUnicode_DATA(u), s, n);
        return u;
    }
    if (kind == 2)
        return unescape(s, n);
    PyObject *u = PyUnicode_DecodeUTF8(s, n, NULL);
    if (u == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
        PyErr_Clear();
    return u;
}

/* A str from a JSON string; FALLBACK when Python must decide (bad escape, bad UTF-8 ...). */
static int parse_str(Cur *c, PyObject **out) {
    const char *s;
    Py_ssize_t n;
    int kind;
    if (scan_string(c, &s, &n, &kind))
        return FALLBACK;
    *out = make_str(s, n, kind);
    if (*out == NULL)
        return PyErr_Occurred() ? FAILED : FALLBACK;
    return 0;
}

/* A JSON integer of at most 18 digits (no fraction or exponent). Sets *start, *len to its text. */
static int parse_int(Cur *c, long long *v, const char **start, Py_ssize_t *len) {
    const unsigned char *p = c->p;
    int neg = 0;
    if (p < c->end && *p == '-') {
        neg = 1;
        p++;
    }
    const unsigned char *digits = p;
    long long x = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        x = x * 10 + (*p - '0');
        p++;
        if (p - digits > 18)
            return FALLBACK;
    }
    Py_ssize_t nd = p - digits;
    if (nd == 0 || (nd > 1 && *digits == '0'))
        return FALLBACK;
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return FALLBACK;
    *v = neg ? -x : x;
    if (start != NULL) {
        *start = (const char *)c->p;
        *len = p - c->p;
    }
    c->p = p;
    return 0;
}

static inline int match_lit(Cur *c, const char *lit, Py_ssize_t n) {
    if (c->end - c->p >= n && memcmp(c->p, lit, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* Skip a scalar value of a field nobody reads (string, integer, true, false, null). */
static int skip_scalar(Cur *c) {
    if (c->p >= c->end)
        return FALLBACK;
    unsigned char ch = *c->p;
    if (ch == '"') {
        const char *s;
        Py_ssize_t n;
        int kind;
        return scan_string(c, &s, &n, &kind);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        long long v;
        return parse_int(c, &v, NULL, NULL);
    }
    if (match_lit(c, "true", 4) || match_lit(c, "false", 5) || match_lit(c, "null", 4))
        return 0;
    return FALLBACK;
}

/* After an object member: 1 on ',' (another member follows), 0 on '}' (the object ends), -1
 * on anything else. */
static int after_member(Cur *c) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        return 1;
    }
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    return -1;
}

/* The ':' after a member name and the whitespace around it; -1 when it is missing or the text
 * ends there. */
static int member_colon(Cur *c) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':')
        return -1;
    c->p++;
    skip_ws(c);
    return c->p < c->end ? 0 : -1;
}

/* extFields: an object of str -> str | integer | true | false | null (null entries dropped,
 * others as fastjson fills a Map<String,String>). Duplicate keys: FALLBACK. */
static int parse_ext(Cur *c, PyObject **out) {
    PyObject *d = PyDict_New();
    if (d == NULL)
        return FAILED;
    c->p++; /* '{' */
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        *out = d;
        return 0;
    }
    for (;;) {
        PyObject *key = NULL, *val = NULL;
        int r;
        skip_ws(c);
        if ((r = parse_str(c, &key)))
            goto fail_r;
        if (member_colon(c) < 0) {
            r = FALLBACK;
            goto fail_r;
        }
        int skip = 0;
        unsigned char ch = *c->p;
        if (ch == '"') {
            if ((r = parse_str(c, &val)))
                goto fail_r;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            long long v;
            const char *s;
            Py_ssize_t n;
            if ((r = parse_int(c, &v, &s, &n)))
                goto fail_r;
            if (n == 2 && s[0] == '-' && s[1] == '0') {
                val = s_zero;
                Py_INCREF(val);
            } else {
                val = make_str(s, n, 0);
                if (val == NULL) {
                    r = FAILED;
                    goto fail_r;
                }
            }
        } else if (match_lit(c, "true", 4)) {
            val = s_true;
            Py_INCREF(val);
        } else if (match_lit(c, "false", 5)) {
            val = s_false;
            Py_INCREF(val);
        } else if (match_lit(c, "null", 4)) {
            skip = 1;
        } else {
            r = FALLBACK;
            goto fail_r;
        }
        r = PyDict_Contains(d, key);
        if (r != 0) {
            r = r < 0 ? FAILED : FALLBACK;
            goto fail_r;
        }
        if (!skip) {
            if (PyDict_SetItem(d, key, val) < 0) {
                r = FAILED;
                goto fail_r;
            }
        } else {
            /* a null entry is dropped, but a later duplicate of its key must still fall back */
            if (PyDict_SetItem(d, key, Py_None) < 0) {
                r = FAILED;
                goto fail_r;
            }
        }
        Py_DECREF(key);
        Py_XDECREF(val);
        int more = after_member(c);
        if (more > 0)
            continue;
        if (more == 0)
            break;
        Py_DECREF(d);
        return FALLBACK;
    fail_r:
        Py_XDECREF(key);
        Py_XDECREF(val);
        Py_DECREF(d);
        return r;
    }
    /* drop the placeholders of null entries (kept above only to detect duplicates) */
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int has_none = 0;
    while (PyDict_Next(d, &pos, &k, &v)) {
        if (v == Py_None) {
            has_none = 1;
            break;
        }
    }
    if (has_none) {
        PyObject *clean = PyDict_New();
        if (clean == NULL) {
            Py_DECREF(d);
            return FAILED;
        }
        pos = 0;
        while (PyDict_Next(d, &pos, &k, &v)) {
            if (v != Py_None && PyDict_SetItem(clean, k, v) < 0) {
                Py_DECREF(clean);
                Py_DECREF(d);
                return FAILED;
            }
        }
        Py_DECREF(d);
        d = clean;
    }
    *out = d;
    return 0;
}

typedef struct {
    long long code, version, opaque, flag;
    int have_code;
    PyObject *language; /* new reference or NULL (OTHER) */
    PyObject *remark;   /* new reference or NULL (None) */
    PyObject *ext;      /* new reference or NULL ({}) */
} Header;

static void header_clear(Header *h) {
    Py_CLEAR(h->language);
    Py_CLEAR(h->remark);
    Py_CLEAR(h->ext);
}

static int parse_header(Cur *c, Header *h) {
    skip_ws(c);
    if (c->p >= c->end || *c->p != '{')
        return FALLBACK;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}')
        return FALLBACK; /* no code */
    for (;;) {
        const char *k;
        Py_ssize_t kn;
        int kind, r;
        skip_ws(c);
        if (scan_string(c, &k, &kn, &kind) || kind == 2)
            return FALLBACK;
        if (member_colon(c) < 0)
            return FALLBACK;
        long long *num = NULL;
        if (kn == 4 && memcmp(k, "code", 4) == 0) {
            num = &h->code;
            h->have_code = 1;
        } else if (kn == 4 && memcmp(k, "flag", 4) == 0) {
            num = &h->flag;
        } else if (kn == 6 && memcmp(k, "opaque", 6) == 0) {
            num = &h->opaque;
        } else if (kn == 7 && memcmp(k, "version", 7) == 0) {
            num = &h->version;
        }
        if (num != NULL) {
            if (parse_int(c, num, NULL, NULL))
                return FALLBACK;
        } else if (kn == 8 && memcmp(k, "language", 8) == 0) {
            if (*c->p == '"') {
                PyObject *name;
                if ((r = parse_str(c, &name)))
                    return r;
                PyObject *code = PyDict_GetItemWithError(language_by_name, name);
                Py_DECREF(name);
                if (code == NULL && PyErr_Occurred())
                    return FAILED;
                Py_XSETREF(h->language, Py_NewRef(code != NULL ? code : language_other));
            } else {
                long long v;
                if (parse_int(c, &v, NULL, NULL))
                    return FALLBACK;
                PyObject *code = PyLong_FromLongLong(v);
                if (code == NULL)
                    return FAILED;
                Py_XSETREF(h->language, code);
            }
        } else if (kn == 6 && memcmp(k, "remark", 6) == 0) {
            if (match_lit(c, "null", 4)) {
                Py_CLEAR(h->remark);
            } else {
                PyObject *s;
                if ((r = parse_str(c, &s)))
                    return r;
                Py_XSETREF(h->remark, s);
            }
        } else if (kn == 9 && memcmp(k, "extFields", 9) == 0) {
            if (match_lit(c, "null", 4)) {
                Py_CLEAR(h->ext);
            } else if (*c->p == '{') {
                PyObject *d;
                if ((r = parse_ext(c, &d)))
                    return r;
                Py_XSETREF(h->ext, d);
            } else {
                return FALLBACK;
            }
        } else if (skip_scalar(c)) {
            return FALLBACK;
        }
        int more = after_member(c);
        if (more > 0)
            continue;
        if (more == 0)
            break;
        return FALLBACK;
    }
    skip_ws(c);
    if (c->p != c->end || !h->have_code)
        return FALLBACK;
    return 0;
}

/* RemotingCommand's slots, in this order (offsets found by configure(); a fresh object's slots are
   NULL, so decode stores into them directly instead of nine PyObject_SetAttr calls) */
static const char *const cmd_slot_names[] = {"code", "language", "version", "opaque", "flag", "remark",
                                             "ext_fields", "body", "serialize_type", NULL};
enum { C_CODE, C_LANGUAGE, C_VERSION, C_OPAQUE, C_FLAG, C_REMARK, C_EXT, C_BODY, C_SERIALIZE, C_COUNT };
static Py_ssize_t cmd_offsets[C_COUNT];

/* the T_OBJECT_EX slot offsets of ``names`` (at most 32) in ``cls`` (a class with __slots__ only)
   into ``offsets``; -1 and a TypeError, ``offsets`` untouched, if one is not such a slot */
static int slot_offsets(PyObject *cls, const char *const *names, Py_ssize_t *offsets) {
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

/* steals value; the slot must be empty (a fresh object) */
static inline void put_cmd_slot(PyObject *obj, int i, PyObject *value) {
    *(PyObject **)((char *)obj + cmd_offsets[i]) = value;
}

static PyObject *codec_decode(PyObject *self, PyObject *arg) {
    if (command_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_ccodec.configure() was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    if (n < 4)
        goto fallback;
    unsigned int word = ((unsigned int)buf[0] << 24) | ((unsigned int)buf[1] << 16) |
                        ((unsigned int)buf[2] << 8) | buf[3];
    Py_ssize_t hlen = word & 0xFFFFFF;
    if ((word >> 24) != 0 || hlen > n - 4)
        goto fallback;
    Header h = {0, 0, 0, 0, 0, NULL, NULL, NULL};
    Cur c = {buf + 4, buf + 4 + hlen};
    int r = parse_header(&c, &h);
    if (r) {
        header_clear(&h);
        if (r == FAILED)
            goto done;
        goto fallback;
    }
    PyTypeObject *tp = (PyTypeObject *)command_cls;
    PyObject *cmd = tp->tp_alloc(tp, 0);
    if (cmd == NULL) {
        header_clear(&h);
        goto done;
    }
    PyObject *ext = h.ext;
    if (ext == NULL || PyDict_GET_SIZE(ext) == 0) {
        Py_XDECREF(ext);
        ext = PyDict_New();
        h.ext = ext;
    }
    PyObject *body = PyBytes_FromStringAndSize((const char *)buf + 4 + hlen, n - 4 - hlen);
    PyObject *code = PyLong_FromLongLong(h.code), *version = PyLong_FromLongLong(h.version);
    PyObject *opaque = PyLong_FromLongLong(h.opaque), *flag = PyLong_FromLongLong(h.flag);
    if (ext == NULL || body == NULL || code == NULL || version == NULL || opaque == NULL || flag == NULL) {
        Py_XDECREF(body);
        Py_XDECREF(code);
        Py_XDECREF(version);
        Py_XDECREF(opaque);
        Py_XDECREF(flag);
        Py_DECREF(cmd);
        header_clear(&h);
        goto done;
    }
    put_cmd_slot(cmd, C_CODE, code);
    put_cmd_slot(cmd, C_LANGUAGE, Py_NewRef(h.language != NULL ? h.language : language_other));
    put_cmd_slot(cmd, C_VERSION, version);
    put_cmd_slot(cmd, C_OPAQUE, opaque);
    put_cmd_slot(cmd, C_FLAG, flag);
    put_cmd_slot(cmd, C_REMARK, Py_NewRef(h.remark != NULL ? h.remark : Py_None));
    put_cmd_slot(cmd, C_EXT, Py_NewRef(ext));
    put_cmd_slot(cmd, C_BODY, body);
    put_cmd_slot(cmd, C_SERIALIZE, Py_NewRef(zero_int));
    header_clear(&h);
    result = cmd;
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON header encoding                                                                         */

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

static int w_reserve(Writer *w, Py_ssize_t extra) {
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

static int w_long(Writer *w, long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    return w_put(w, tmp, n);
}

/* The UTF-8 form of a str; NULL with *r set to FALLBACK when it cannot be encoded (lone
 * surrogates: the Python path raises UnicodeEncodeError) or to FAILED (another error). */
static const char *utf8_of(PyObject *s, Py_ssize_t *n, int *r) {
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
static int w_json_str(Writer *w, PyObject *s) {
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

/* An int attribute as a C long long; FALLBACK when it is not an int (or too big). */
static int get_long(PyObject *cmd, PyObject *name, long long *v) {
    PyObject *x = PyObject_GetAttr(cmd, name);
    if (x == NULL)
        return FAILED;
    if (!PyLong_Check(x)) {
        Py_DECREF(x);
        return FALLBACK;
    }
    int overflow;
    *v = PyLong_AsLongLongAndOverflow(x, &overflow);
    Py_DECREF(x);
    if (overflow)
        return FALLBACK;
    if (*v == -1 && PyErr_Occurred())
        return FAILED;
    return 0;
}

static int is_dict(PyObject *o) { return PyDict_CheckExact(o); }
static int is_str(PyObject *o) { return PyUnicode_Check(o); }

/* The attribute `name` of cmd in *out (a new reference; NULL for None); FALLBACK when it is
 * neither None nor accepted by `check` (the Python encoder decides). */
static int get_optional(PyObject *cmd, PyObject *name, int (*check)(PyObject *), PyObject **out) {
    PyObject *v = PyObject_GetAttr(cmd, name);
    *out = NULL;
    if (v == NULL)
        return FAILED;
    if (v == Py_None) {
        Py_DECREF(v);
        return 0;
    }
    if (!check(v)) {
        Py_DECREF(v);
        return FALLBACK;
    }
    *out = v;
    return 0;
}

/* ,"extFields":{...} of a non-empty dict (None values skipped, as _clean_ext does); FALLBACK
 * for a name or value that is not a str. */
static int write_ext(Writer *w, PyObject *ext) {
    if (PyDict_GET_SIZE(ext) == 0)
        return 0;
    if (W_LIT(w, ",\"extFields\":{") < 0)
        return FAILED;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int first = 1, r;
    while (PyDict_Next(ext, &pos, &k, &v)) {
        if (v == Py_None)
            continue; /* Java skips null fields */
        if (!PyUnicode_Check(k) || !PyUnicode_Check(v))
            return FALLBACK;
        if (!first && W_LIT(w, ",") < 0)
            return FAILED;
        first = 0;
        if ((r = w_json_str(w, k)) || W_LIT(w, ":") < 0 || (r = w_json_str(w, v)))
            return r ? r : FAILED;
    }
    return W_LIT(w, "}") < 0 ? FAILED : 0;
}

/* "language":"NAME" of the command's language code (OTHER when unknown) */
static int write_language(Writer *w, PyObject *cmd) {
    PyObject *lang = PyObject_GetAttr(cmd, s_language);
    if (lang == NULL)
        return FAILED;
    PyObject *name = PyDict_GetItemWithError(language_names, lang); /* borrowed */
    Py_DECREF(lang);
    if (name == NULL)
        return PyErr_Occurred() || W_LIT(w, "OTHER") < 0 ? FAILED : 0;
    Py_ssize_t nn;
    const char *ns = PyUnicode_AsUTF8AndSize(name, &nn);
    return ns == NULL || w_put(w, ns, nn) < 0 ? FAILED : 0;
}

static int write_header(Writer *w, PyObject *cmd) {
    long long code, flag, opaque, version;
    PyObject *ext, *remark;
    int r;
    if ((r = get_long(cmd, s_code, &code)) || (r = get_long(cmd, s_flag, &flag)) ||
        (r = get_long(cmd, s_opaque, &opaque)) || (r = get_long(cmd, s_version, &version)))
        return r;
    if ((r = get_optional(cmd, s_ext_fields, is_dict, &ext)))
        return r;
    if ((r = get_optional(cmd, s_remark, is_str, &remark))) {
        Py_XDECREF(ext);
        return r;
    }
    if (W_LIT(w, "{\"code\":") < 0 || w_long(w, code) < 0)
        r = FAILED;
    if (!r && ext != NULL)
        r = write_ext(w, ext);
    if (!r && (W_LIT(w, ",\"flag\":") < 0 || w_long(w, flag) < 0 || W_LIT(w, ",\"language\":\"") < 0))
        r = FAILED;
    if (!r)
        r = write_language(w, cmd);
    if (!r && (W_LIT(w, "\",\"opaque\":") < 0 || w_long(w, opaque) < 0))
        r = FAILED;
    if (!r && remark != NULL && (W_LIT(w, ",\"remark\":") < 0 || (r = w_json_str(w, remark))))
        r = r ? r : FAILED;
    if (!r && (W_LIT(w, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") < 0 || w_long(w, version) < 0 ||
               W_LIT(w, "}") < 0))
        r = FAILED;
    Py_XDECREF(ext);
    Py_XDECREF(remark);
    return r;
}

static PyObject *codec_encode(PyObject *self, PyObject *cmd) {
    if (command_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_ccodec.configure() was not called");
        return NULL;
    }
    long long st;
    int r = get_long(cmd, s_serialize_type, &st);
    if (r == FAILED)
        return NULL;
    if (r || st != 0)
        Py_RETURN_NONE;
    Writer w;
    w_init(&w, 8); /* room for the length prefix and the serialize type/header length word */
    PyObject *result = NULL;
    r = write_header(&w, cmd);
    if (r == FAILED)
        goto done;
    Py_ssize_t hlen = w.len - 8;
    if (r || hlen > 0xFFFFFF) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *body = PyObject_GetAttr(cmd, s_body);
    if (body == NULL)
        goto done;
    Py_buffer bv;
    if (PyObject_GetBuffer(body, &bv, PyBUF_SIMPLE) < 0) {
        Py_DECREF(body);
        PyErr_Clear();
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t total = 4 + hlen + bv.len;
    if (total > 0x7FFFFFFF) {
        PyBuffer_Release(&bv);
        Py_DECREF(body);
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, 4 + total);
    if (result != NULL) {
        unsigned char *o = (unsigned char *)PyBytes_AS_STRING(result);
        unsigned int t = (unsigned int)total, hw = (unsigned int)hlen; /* serialize type 0 */
        o[0] = t >> 24; o[1] = t >> 16; o[2] = t >> 8; o[3] = t;
        o[4] = hw >> 24; o[5] = hw >> 16; o[6] = hw >> 8; o[7] = hw;
        memcpy(o + 8, w.buf + 8, hlen);
        if (bv.len)
            memcpy(o + 8 + hlen, bv.buf, bv.len);
    }
    PyBuffer_Release(&bv);
    Py_DECREF(body);
done:
    if (w.buf != w.small)
        PyMem_Free(w.buf);
    return result;
}

/* ------------------------------------------------------------------------------------------ */
/* Typed headers (rocketmq_sdk.protocol.headers): the C twin of the reader _compile_reader builds */

enum { K_STR = 0, K_INT = 1, K_BOOL = 2, K_BOOL_OR_ONE = 3 };

/* An ASCII str of [-]digits (at most 18) as an int; NULL without an exception otherwise. */
static PyObject *ascii_int(PyObject *v) {
    if (!PyUnicode_IS_ASCII(v))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(v);
    const char *s = (const char *)PyUnicode_DATA(v);
    Py_ssize_t i = 0;
    int neg = 0;
    if (n > 0 && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (n - i < 1 || n - i > 18)
        return NULL;
    long long x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return NULL;
        x = x * 10 + (s[i] - '0');
    }
    return PyLong_FromLongLong(neg ? -x : x);
}

/* 1 when the ASCII str v equals lit (lower case) ignoring ASCII case, 0 when not, -1 when v is
 * not ASCII (Python's str.lower() decides). */
static int ascii_ieq(PyObject *v, const char *lit, Py_ssize_t n) {
    if (!PyUnicode_IS_ASCII(v))
        return -1;
    if (PyUnicode_GET_LENGTH(v) != n)
        return 0;
    const char *s = (const char *)PyUnicode_DATA(v);
    for (Py_ssize_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch >= 'A' && ch <= 'Z')
            ch += 32;
        if (ch != lit[i])
            return 0;
    }
    return 1;
}

static PyObject *parse_field(PyObject *v, long kind, PyObject *parser) {
    switch (kind) {
    case K_STR:
        if (PyUnicode_CheckExact(v))
            return Py_NewRef(v);
        break;
    case K_INT:
        if (PyLong_CheckExact(v))
            return Py_NewRef(v);
        if (PyUnicode_CheckExact(v)) {
            PyObject *x = ascii_int(v);
            if (x != NULL || PyErr_Occurred())
                return x;
        }
        break;
    case K_BOOL:
        if (PyBool_Check(v))
            return Py_NewRef(v);
        if (PyUnicode_CheckExact(v)) {
            int r = ascii_ieq(v, "true", 4);
            if (r >= 0)
                return Py_NewRef(r ? Py_True : Py_False);
        }
        break;
    case K_BOOL_OR_ONE:
        if (PyBool_Check(v))
            return Py_NewRef(v);
        if (PyUnicode_CheckExact(v) && PyUnicode_IS_ASCII(v)) {
            Py_ssize_t n = PyUnicode_GET_LENGTH(v);
            const char *s = (const char *)PyUnicode_DATA(v);
            /* str.strip() removes more than ASCII blanks: anything but a plain value goes to Python */
            if (n > 0 && s[0] > ' ' && s[n - 1] > ' ') {
                int r = ascii_ieq(v, "true", 4);
                return Py_NewRef(r == 1 || (n == 1 && s[0] == '1') ? Py_True : Py_False);
            }
        }
        break;
    }
    return PyObject_CallOneArg(parser, v);
}

/* read_header(cls, ext, fields) -> cls instance | None
 *   fields: tuple of (attr: str, key: str | None, kind: int, default, parser) in any order;
 *   every slot of cls must be listed. None when ext is not a dict (Python decides). */
static PyObject *codec_read_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "read_header(cls, ext, fields)");
        return NULL;
    }
    PyObject *ext = args[1], *fields = args[2];
    if (!PyDict_CheckExact(ext))
        Py_RETURN_NONE;
    PyTypeObject *tp = (PyTypeObject *)args[0];
    PyObject *obj = tp->tp_alloc(tp, 0);
    if (obj == NULL)
        return NULL;
    Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    for (Py_ssize_t i = 0; i < nf; i++) {
        PyObject *f = PyTuple_GET_ITEM(fields, i);
        if (!PyTuple_Check(f) || PyTuple_GET_SIZE(f) != 5) {
            PyErr_SetString(PyExc_TypeError, "read_header: a field is (attr, key, kind, default, parser)");
            goto fail;
        }
        PyObject *attr = PyTuple_GET_ITEM(f, 0), *key = PyTuple_GET_ITEM(f, 1);
        PyObject *val = NULL;
        if (key != Py_None) {
            PyObject *v = PyDict_GetItemWithError(ext, key); /* borrowed */
            if (v == NULL && PyErr_Occurred())
                goto fail;
            if (v != NULL && v != Py_None) {
                val = parse_field(v, PyLong_AsLong(PyTuple_GET_ITEM(f, 2)), PyTuple_GET_ITEM(f, 4));
                if (val == NULL)
                    goto fail;
            }
        }
        int r = PyObject_SetAttr(obj, attr, val != NULL ? val : PyTuple_GET_ITEM(f, 3));
        Py_XDECREF(val);
        if (r < 0)
            goto fail;
    }
    return obj;
fail:
    Py_DECREF(obj);
    return NULL;
}

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

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}
static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint32_t)be32(p + 4));
}

/* steals value; the slot must be empty (a fresh object) */
static inline void put_slot(PyObject *obj, int i, PyObject *value) {
    *(PyObject **)((char *)obj + ext_offsets[i]) = value;
}

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
        Py_ssize_t j = i;
        while (j < n && p[j] != 2)
            j++;
        /* item p[i:j]: key up to the first \x01 */
        Py_ssize_t sep = i;
        while (sep < j && p[sep] != 1)
            sep++;
        int kind_k = 0, kind_v = 0;
        for (Py_ssize_t q = i; q < j; q++)
            if (p[q] >= 0x80) {
                if (q < sep)
                    kind_k = 1;
                else
                    kind_v = 1;
            }
        PyObject *k = make_str((const char *)p + i, sep - i, kind_k);
        if (k == NULL)
            goto fail;
        Py_ssize_t vs = sep < j ? sep + 1 : j;
        PyObject *v = make_str((const char *)p + vs, j - vs, kind_v);
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
        PyErr_SetString(PyExc_RuntimeError, "_ccodec.configure_records() was not called");
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
            put_slot(m, i, vals[i]); /* a NULL slot reads as AttributeError; m is dropped anyway */
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

static PyObject *s_properties, *s_flag_attr;

static inline void put_be32(char *o, uint32_t v) {
    o[0] = (char)(v >> 24);
    o[1] = (char)(v >> 16);
    o[2] = (char)(v >> 8);
    o[3] = (char)v;
}

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
    if (w.buf != w.small)
        PyMem_Free(w.buf);
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

/* ------------------------------------------------------------------------------------------ */
/* Send requests from a header template (rocketmq_sdk.producer.send_request.SendRequest.encode) */

/* render_send(pieces, vals, flag, opaque, body) -> bytes | None
 *   pieces: the template's 9 str pieces; vals: (e, f, g, h, i, n) str values, e-h written as they
 *   are, i and n as JSON strings; flag, opaque: ints. The whole frame, or None when Python must
 *   render it (a value of another type, text that cannot be UTF-8 encoded, a header over 16 MiB). */
static PyObject *codec_render_send(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "render_send(pieces, vals, flag, opaque, body)");
        return NULL;
    }
    PyObject *pieces = PySequence_Fast(args[0], "pieces must be a sequence");
    if (pieces == NULL)
        return NULL;
    PyObject *vals = PySequence_Fast(args[1], "vals must be a sequence");
    if (vals == NULL) {
        Py_DECREF(pieces);
        return NULL;
    }
    Writer w;
    w_init(&w, 8);
    PyObject *result = NULL;
    int r = 0;
    long long flag = 0, opaque = 0;
    Py_buffer bv;
    bv.obj = NULL;
    if (PySequence_Fast_GET_SIZE(pieces) != 9 || PySequence_Fast_GET_SIZE(vals) != 6 ||
        !PyLong_CheckExact(args[2]) || !PyLong_CheckExact(args[3])) {
        r = FALLBACK;
        goto done;
    }
    int of1, of2;
    flag = PyLong_AsLongLongAndOverflow(args[2], &of1);
    opaque = PyLong_AsLongLongAndOverflow(args[3], &of2);
    if (of1 || of2) {
        r = FALLBACK;
        goto done;
    }
    for (int k = 0; k < 9 && r == 0; k++) {
        PyObject *piece = PySequence_Fast_GET_ITEM(pieces, k);
        if (!PyUnicode_CheckExact(piece)) {
            r = FALLBACK;
            break;
        }
        Py_ssize_t pn;
        const char *ps = utf8_of(piece, &pn, &r);
        if (ps == NULL)
            break;
        if (w_put(&w, ps, pn) < 0) {
            r = FAILED;
            break;
        }
        if (k < 6) {
            PyObject *v = PySequence_Fast_GET_ITEM(vals, k);
            if (!PyUnicode_CheckExact(v)) {
                r = FALLBACK;
                break;
            }
            if (k >= 4) {
                r = w_json_str(&w, v);
            } else {
                Py_ssize_t vn;
                const char *vs = utf8_of(v, &vn, &r);
                if (vs != NULL && w_put(&w, vs, vn) < 0)
                    r = FAILED;
            }
        } else if (k == 6) {
            r = w_long(&w, flag) < 0 ? FAILED : 0;
        } else if (k == 7) {
            r = w_long(&w, opaque) < 0 ? FAILED : 0;
        }
    }
    if (r)
        goto done;
    Py_ssize_t hlen = w.len - 8;
    if (hlen > 0xFFFFFF) {
        r = FALLBACK;
        goto done;
    }
    if (PyObject_GetBuffer(args[4], &bv, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        bv.obj = NULL;
        r = FALLBACK;
        goto done;
    }
    if (4 + hlen + bv.len > 0x7FFFFFFF) {
        r = FALLBACK;
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, 8 + hlen + bv.len);
    if (result != NULL) {
        char *o = PyBytes_AS_STRING(result);
        put_be32(o, (uint32_t)(4 + hlen + bv.len));
        put_be32(o + 4, (uint32_t)hlen);
        memcpy(o + 8, w.buf + 8, hlen);
        if (bv.len)
            memcpy(o + 8 + hlen, bv.buf, bv.len);
    }
done:
    if (bv.obj != NULL)
        PyBuffer_Release(&bv);
    if (w.buf != w.small)
        PyMem_Free(w.buf);
    Py_DECREF(pieces);
    Py_DECREF(vals);
    if (r == FALLBACK)
        Py_RETURN_NONE;
    return result; /* NULL with an exception when r == FAILED */
}

/* ------------------------------------------------------------------------------------------ */
/* UNIQ_KEY ids (msgid.UniqIdGenerator.create of the process-wide generator, docs/protocol.md §4.7) */

#include <time.h>

static struct {
    int ready;                /* configured and not invalidated (fork, month end) */
    char prefix[64];          /* hex of ip + pid + random int (20 chars for an IPv4 ip) */
    Py_ssize_t prefix_len;
    long long start_ms;       /* start of the current month, epoch ms */
    long long next_start_ms;  /* start of the next month */
    unsigned int counter;     /* next counter value (16 bits used) */
} uniq;

/* uniq_configure(prefix: str of at most 64 ASCII hex chars, start_ms, next_start_ms, counter) or
 * uniq_configure(None): stop (uniq_create returns None until configured again). */
static PyObject *codec_uniq_configure(PyObject *self, PyObject *args) {
    PyObject *prefix;
    long long start = 0, next = 0;
    unsigned long long counter = 0;
    if (!PyArg_ParseTuple(args, "O|LLK", &prefix, &start, &next, &counter))
        return NULL;
    uniq.ready = 0;
    if (prefix == Py_None)
        Py_RETURN_NONE;
    if (!PyUnicode_Check(prefix) || !PyUnicode_IS_ASCII(prefix) || PyUnicode_GET_LENGTH(prefix) > 64) {
        PyErr_SetString(PyExc_ValueError, "uniq_configure: the prefix is at most 64 ASCII characters");
        return NULL;
    }
    uniq.prefix_len = PyUnicode_GET_LENGTH(prefix);
    memcpy(uniq.prefix, PyUnicode_DATA(prefix), uniq.prefix_len);
    uniq.start_ms = start;
    uniq.next_start_ms = next;
    uniq.counter = (unsigned int)(counter & 0xFFFF);
    uniq.ready = 1;
    Py_RETURN_NONE;
}

/* uniq_create() -> str | None: prefix + 8 hex digits of the ms since the month start + 4 of the
 * counter, or None when not configured or the month is over (the Python generator then rolls it). */
static PyObject *codec_uniq_create(PyObject *self, PyObject *unused) {
    if (!uniq.ready)
        Py_RETURN_NONE;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long now = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    if (now >= uniq.next_start_ms)
        Py_RETURN_NONE;
    static const char hex[] = "0123456789ABCDEF";
    Py_ssize_t k = uniq.prefix_len;
    PyObject *out = PyUnicode_New(k + 12, 127);
    if (out == NULL)
        return NULL;
    char *o = (char *)PyUnicode_DATA(out);
    memcpy(o, uniq.prefix, k);
    uint32_t delta = (uint32_t)((now - uniq.start_ms) & 0xFFFFFFFF);
    for (int i = 0; i < 8; i++)
        o[k + i] = hex[(delta >> (28 - 4 * i)) & 15];
    unsigned int n = uniq.counter & 0xFFFF;
    uniq.counter = (n + 1) & 0xFFFF;
    for (int i = 0; i < 4; i++)
        o[k + 8 + i] = hex[(n >> (12 - 4 * i)) & 15];
    return out;
}

/* ------------------------------------------------------------------------------------------ */

static PyObject *codec_configure(PyObject *self, PyObject *args) {
    PyObject *cls, *by_name, *names, *other;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyType_Type, &cls, &PyDict_Type, &by_name, &PyDict_Type,
                          &names, &PyLong_Type, &other))
        return NULL;
    if (slot_offsets(cls, cmd_slot_names, cmd_offsets) < 0)
        return NULL;
    Py_XSETREF(command_cls, Py_NewRef(cls));
    Py_XSETREF(language_by_name, Py_NewRef(by_name));
    Py_XSETREF(language_names, Py_NewRef(names));
    Py_XSETREF(language_other, Py_NewRef(other));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"configure", codec_configure, METH_VARARGS,
     "configure(cls, language_by_name, language_names, other): the RemotingCommand class and the "
     "LanguageCode maps."},
    {"decode", codec_decode, METH_O,
     "decode(frame) -> RemotingCommand | None: a JSON-header frame (no length prefix), or None "
     "when the Python decoder must handle it."},
    {"encode", codec_encode, METH_O,
     "encode(cmd) -> bytes | None: the whole frame of a JSON-header command, or None when the "
     "Python encoder must handle it."},
    {"read_header", (PyCFunction)(void (*)(void))codec_read_header, METH_FASTCALL,
     "read_header(cls, ext, fields) -> header | None: a typed header read from extFields; fields is "
     "a tuple of (attr, key or None, kind 0 str / 1 int / 2 bool / 3 bool-or-1, default, parser)."},
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
    {"render_send", (PyCFunction)(void (*)(void))codec_render_send, METH_FASTCALL,
     "render_send(pieces, vals, flag, opaque, body) -> bytes | None: the frame of a templated send request, "
     "or None when the Python encoder must render it."},
    {"uniq_configure", codec_uniq_configure, METH_VARARGS,
     "uniq_configure(prefix, start_ms, next_start_ms, counter) | uniq_configure(None): the state of "
     "uniq_create (the process-wide UNIQ_KEY generator's)."},
    {"uniq_create", codec_uniq_create, METH_NOARGS,
     "uniq_create() -> str | None: a UNIQ_KEY id, or None when the Python generator must make it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_ccodec",
    "C accelerator of the RocketMQ remoting frame codec (pure-Python twin: "
    "rocketmq_sdk.remoting.command).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__ccodec(void) {
#define INTERN(var, text)                                                                          \
    if ((var = PyUnicode_InternFromString(text)) == NULL)                                          \
        return NULL;
    INTERN(s_code, "code");
    INTERN(s_language, "language");
    INTERN(s_version, "version");
    INTERN(s_opaque, "opaque");
    INTERN(s_flag, "flag");
    INTERN(s_remark, "remark");
    INTERN(s_ext_fields, "ext_fields");
    INTERN(s_body, "body");
    INTERN(s_serialize_type, "serialize_type");
    INTERN(s_true, "true");
    INTERN(s_false, "false");
    INTERN(s_zero, "0");
    INTERN(s_properties, "properties");
    INTERN(s_flag_attr, "flag");
#undef INTERN
    if ((zero_int = PyLong_FromLong(0)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
