/* C twin of sdk/remoting/command.py (rocketmq_sdk.remoting._ccommand): the remoting frame codec.
 *
 * The pure-Python twin is RemotingCommand.decode / RemotingCommand.encode in command.py; it stays
 * the reference. These functions handle the common case only and return None for anything unusual
 * (escapes in JSON strings, floats, nested values, duplicate extFields keys, the ROCKETMQ binary
 * header, malformed frames, non-str values ...): the caller then runs the Python code, which
 * produces the same result or raises the error. Compared by tests/remoting/test_ccommand.py.
 *
 *   configure(cls, language_by_name, language_names, other)
 *       cls: RemotingCommand; language_by_name: {"JAVA": 0, ...}; language_names: {0: "JAVA", ...};
 *       other: the int OTHER language code.
 *   decode(frame: bytes-like) -> RemotingCommand | None
 *       frame WITHOUT its 4-byte length prefix, JSON header only.
 *   encode(cmd) -> bytes | None
 *       the whole frame (length prefix included) of a JSON-serialised command.
 */
#include "../_chelpers.h"

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
    return kind == 2 ? unescape(s, n) : str_of_utf8(s, n, kind == 0);
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

/* steals value; the slot must be empty (a fresh object) */
static inline void put_cmd_slot(PyObject *obj, int i, PyObject *value) {
    put_slot(obj, cmd_offsets[i], value);
}

static PyObject *codec_decode(PyObject *self, PyObject *arg) {
    if (command_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_ccommand.configure() was not called");
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
        PyErr_SetString(PyExc_RuntimeError, "_ccommand.configure() was not called");
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
    w_free(&w);
    return result;
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
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_ccommand",
            "C twin of rocketmq_sdk.remoting.command: the remoting frame codec (RemotingCommand.decode / .encode).");

PyMODINIT_FUNC PyInit__ccommand(void) {
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
#undef INTERN
    if ((zero_int = PyLong_FromLong(0)) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
