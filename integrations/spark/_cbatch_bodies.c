/* C twin of integrations/spark/batch_bodies.py (rocketmq_sdk.integrations.spark._cbatch_bodies): batch
 * entries (docs/protocol.md §4.6) of a writer's rows straight from Arrow columns.
 *
 *   configure(reserved)     reserved: sorted list of the reserved property names (bytes)
 *   encode_rows(body, tags, keys, props, key_suffix, max_body, ids, start, stop, groups, outs, index, bad) -> i
 *                           (twin: batch_bodies.encode_rows_py; the arguments are described there)
 *
 * encode_rows returns ``stop``, or the first row it leaves to the Python twin (a list item that is not
 * bytes, str or None; a map with more than MAX_PROPS entries or a name given twice). A bad row is not
 * appended; (row, code) goes to ``bad``, as in the twin (same codes, same order of the checks).
 */
#include "../../sdk/_chelpers.h"
#include "_cspark.h"

#define MAX_PROPS 64
enum { TAG_BAR = 1, BODY_NULL, TAG_SEPARATOR, KEYS_SEPARATOR, PROPERTY_SEPARATOR, PROPERTY_EMPTY, PROPERTY_RESERVED,
       BODY_EMPTY, BODY_TOO_LARGE, PROPERTIES_TOO_LONG };


/* A text column: Arrow buffers (valid may be absent) or a list. */
typedef struct {
    PyObject *list;
    Py_buffer valid, offsets, data;
    int has_valid, has_buffers;
    Py_ssize_t rows; /* rows the buffers cover */
} TextCol;

static void col_release(TextCol *c) {
    if (c->has_valid)
        PyBuffer_Release(&c->valid);
    if (c->has_buffers) {
        PyBuffer_Release(&c->offsets);
        PyBuffer_Release(&c->data);
    }
    c->has_valid = c->has_buffers = 0;
}

/* 0 ok, -1 error set; rows = the rows the column must cover */
static int col_open(PyObject *o, TextCol *c, Py_ssize_t rows, const char *what) {
    memset(c, 0, sizeof(*c));
    if (PyList_CheckExact(o)) {
        if (PyList_GET_SIZE(o) < rows) {
            PyErr_Format(PyExc_ValueError, "the %s list has %zd items for %zd rows", what, PyList_GET_SIZE(o), rows);
            return -1;
        }
        c->list = o;
        c->rows = rows;
        return 0;
    }
    if (!PyTuple_CheckExact(o) || PyTuple_GET_SIZE(o) != 3) {
        PyErr_Format(PyExc_TypeError, "the %s column must be a list or (valid, offsets, data)", what);
        return -1;
    }
    PyObject *v = PyTuple_GET_ITEM(o, 0);
    if (v != Py_None) {
        if (PyObject_GetBuffer(v, &c->valid, PyBUF_SIMPLE) < 0)
            return -1;
        c->has_valid = 1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(o, 1), &c->offsets, PyBUF_SIMPLE) < 0) {
        col_release(c);
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(o, 2), &c->data, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&c->offsets);
        col_release(c);
        return -1;
    }
    c->has_buffers = 1;
    if ((c->has_valid && c->valid.len < rows) || c->offsets.len < 4 * (rows + 1)) {
        PyErr_Format(PyExc_ValueError, "the %s column's buffers cover fewer than %zd rows", what, rows);
        col_release(c);
        return -1;
    }
    c->rows = rows;
    return 0;
}

static inline int32_t le32(const char *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v; /* little-endian host (the C twins' build targets) */
}

#define TEXT_OK 2 /* col_get: a value (FALLBACK is 1, FAILED -1, a null 0) */

/* row i: TEXT_OK with *p and *n set, 0 null, FALLBACK (an item Python must handle), FAILED (malformed: error set) */
static int col_get(TextCol *c, Py_ssize_t i, const char **p, Py_ssize_t *n) {
    if (c->list) {
        PyObject *v = PyList_GET_ITEM(c->list, i);
        if (v == Py_None)
            return 0;
        if (PyBytes_CheckExact(v)) {
            *p = PyBytes_AS_STRING(v);
            *n = PyBytes_GET_SIZE(v);
            return TEXT_OK;
        }
        if (PyUnicode_CheckExact(v)) {
            *p = PyUnicode_AsUTF8AndSize(v, n);
            if (*p == NULL) {
                PyErr_Clear();
                return FALLBACK;
            }
            return TEXT_OK;
        }
        return FALLBACK;
    }
    if (c->has_valid && !((const char *)c->valid.buf)[i])
        return 0;
    int32_t lo = le32((const char *)c->offsets.buf + 4 * i), hi = le32((const char *)c->offsets.buf + 4 * i + 4);
    if (lo < 0 || hi < lo || hi > c->data.len) {
        PyErr_Format(PyExc_ValueError, "offsets %d..%d of row %zd are outside the data (%zd bytes)", lo, hi, i,
                     c->data.len);
        return FAILED;
    }
    *p = (const char *)c->data.buf + lo;
    *n = hi - lo;
    return TEXT_OK;
}

/* row i of a column that may be absent (``have`` 0): TEXT_OK (*n 0 for a null, an empty value or no
 * column), FALLBACK or FAILED */
static inline int opt_get(TextCol *c, int have, Py_ssize_t i, const char **p, Py_ssize_t *n) {
    *n = 0;
    if (!have)
        return TEXT_OK;
    int r = col_get(c, i, p, n);
    if (r == 0) {
        *n = 0;
        return TEXT_OK;
    }
    return r;
}

static inline int has_sep(const char *p, Py_ssize_t n) {
    return memchr(p, 1, (size_t)n) != NULL || memchr(p, 2, (size_t)n) != NULL;
}

static int has_bar(const char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i + 1 < n; i++)
        if (p[i] == '|' && p[i + 1] == '|')
            return 1;
    return 0;
}

static int bad_row(PyObject *bad, Py_ssize_t row, int code) {
    PyObject *t = Py_BuildValue("(ni)", row, code);
    if (t == NULL)
        return -1;
    int r = PyList_Append(bad, t);
    Py_DECREF(t);
    return r;
}


typedef struct {
    const char *k, *v;
    Py_ssize_t kn, vn;
} Prop;

static PyObject *encode_rows(PyObject *self, PyObject *args) {
    PyObject *body_o, *tags_o, *keys_o, *props_o, *suffix_o, *ids, *groups_o, *outs, *index, *bad;
    Py_ssize_t max_body, start, stop;
    if (!PyArg_ParseTuple(args, "OOOOOnO!nnOO!O!O!", &body_o, &tags_o, &keys_o, &props_o, &suffix_o, &max_body,
                          &PyList_Type, &ids, &start, &stop, &groups_o, &PyList_Type, &outs, &PyList_Type, &index,
                          &PyList_Type, &bad))
        return NULL;
    Py_ssize_t ngroups = PyList_GET_SIZE(outs);
    if (start < 0 || stop < start || PyList_GET_SIZE(ids) < stop || PyList_GET_SIZE(index) != ngroups ||
        ngroups < 1) {
        PyErr_SetString(PyExc_ValueError, "encode_rows: inconsistent rows, ids, outs or index");
        return NULL;
    }
    for (Py_ssize_t g = 0; g < ngroups; g++)
        if (!PyByteArray_CheckExact(PyList_GET_ITEM(outs, g)) || !PyByteArray_CheckExact(PyList_GET_ITEM(index, g))) {
            PyErr_SetString(PyExc_TypeError, "encode_rows: outs and index hold bytearrays");
            return NULL;
        }
    const char *prefix = NULL;
    Py_ssize_t prefix_n = 0, row_base = 0;
    if (suffix_o != Py_None) {
        PyObject *pre;
        if (!PyArg_ParseTuple(suffix_o, "Un", &pre, &row_base))
            return NULL;
        prefix = PyUnicode_AsUTF8AndSize(pre, &prefix_n);
        if (prefix == NULL)
            return NULL;
    }
    TextCol body, tags, keys, pkeys, pvals;
    Py_buffer pvalid, poffs, groups;
    int have_tags = tags_o != Py_None, have_keys = keys_o != Py_None, have_props = props_o != Py_None;
    int have_pvalid = 0, have_groups = groups_o != Py_None;
    Py_ssize_t nprops_total = 0;
    memset(&tags, 0, sizeof(tags));
    memset(&keys, 0, sizeof(keys));
    memset(&pkeys, 0, sizeof(pkeys));
    memset(&pvals, 0, sizeof(pvals));
    memset(&poffs, 0, sizeof(poffs));
    memset(&groups, 0, sizeof(groups));
    PyObject *result = NULL;
    int have_poffs = 0;
    if (col_open(body_o, &body, stop, "body") < 0)
        return NULL;
    if (have_tags && col_open(tags_o, &tags, stop, "tags") < 0)
        goto done;
    if (have_keys && col_open(keys_o, &keys, stop, "keys") < 0)
        goto done;
    if (have_groups) {
        if (PyObject_GetBuffer(groups_o, &groups, PyBUF_SIMPLE) < 0) {
            have_groups = 0;
            goto done;
        }
        if (groups.len < 4 * stop) {
            PyErr_SetString(PyExc_ValueError, "encode_rows: fewer groups than rows");
            goto done;
        }
    }
    if (have_props) {
        if (!PyTuple_CheckExact(props_o) || PyTuple_GET_SIZE(props_o) != 4) {
            PyErr_SetString(PyExc_TypeError, "props must be (valid, offsets, keys, values)");
            have_props = 0;
            goto done;
        }
        PyObject *v = PyTuple_GET_ITEM(props_o, 0);
        if (v != Py_None) {
            if (PyObject_GetBuffer(v, &pvalid, PyBUF_SIMPLE) < 0)
                goto done;
            have_pvalid = 1;
            if (pvalid.len < stop) {
                PyErr_SetString(PyExc_ValueError, "the properties' validity covers fewer rows");
                goto done;
            }
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(props_o, 1), &poffs, PyBUF_SIMPLE) < 0)
            goto done;
        have_poffs = 1;
        if (poffs.len < 4 * (stop + 1)) {
            PyErr_SetString(PyExc_ValueError, "the properties' offsets cover fewer rows");
            goto done;
        }
        nprops_total = le32((const char *)poffs.buf + 4 * stop);
        if (nprops_total < 0) {
            PyErr_SetString(PyExc_ValueError, "negative properties offset");
            goto done;
        }
        if (col_open(PyTuple_GET_ITEM(props_o, 2), &pkeys, nprops_total, "property names") < 0 ||
            col_open(PyTuple_GET_ITEM(props_o, 3), &pvals, nprops_total, "property values") < 0)
            goto done;
    }
    Prop props[MAX_PROPS];
    Py_ssize_t i = start;
    for (; i < stop; i++) {
        const char *tag = NULL, *key = NULL, *bp = NULL;
        Py_ssize_t tag_n = 0, key_n = 0, bn = 0;
        int r;
#define BAD(code)                                                                                          \
    {                                                                                                      \
        if (bad_row(bad, i, code) < 0)                                                                     \
            goto done;                                                                                     \
        continue;                                                                                          \
    }
        if ((r = opt_get(&tags, have_tags, i, &tag, &tag_n)) != TEXT_OK) {
            if (r == FAILED)
                goto done;
            break;
        }
        if (tag_n && has_bar(tag, tag_n))
            BAD(TAG_BAR)
        if ((r = col_get(&body, i, &bp, &bn)) == FAILED)
            goto done;
        if (r == FALLBACK)
            break;
        if (r == 0)
            BAD(BODY_NULL)
        if (tag_n && has_sep(tag, tag_n))
            BAD(TAG_SEPARATOR)
        if ((r = opt_get(&keys, have_keys, i, &key, &key_n)) != TEXT_OK) {
            if (r == FAILED)
                goto done;
            break;
        }
        if (key_n && has_sep(key, key_n))
            BAD(KEYS_SEPARATOR)
        int np = 0, code = 0, fallback = 0;
        Py_ssize_t props_bytes = 0;
        if (have_props && (!have_pvalid || ((const char *)pvalid.buf)[i])) {
            int32_t lo = le32((const char *)poffs.buf + 4 * i), hi = le32((const char *)poffs.buf + 4 * i + 4);
            if (lo < 0 || hi < lo || hi > nprops_total) {
                PyErr_Format(PyExc_ValueError, "property offsets %d..%d of row %zd out of range", lo, hi, i);
                goto done;
            }
            for (int32_t j = lo; j < hi; j++) {
                const char *v, *k;
                Py_ssize_t vn, kn;
                r = col_get(&pvals, j, &v, &vn);
                if (r == 0) /* a null value: left out */
                    continue;
                if (r == TEXT_OK && (r = col_get(&pkeys, j, &k, &kn)) == 0)
                    kn = 0, k = "", r = TEXT_OK;
                if (r == FAILED)
                    goto done;
                if (r == FALLBACK || np == MAX_PROPS) {
                    fallback = 1;
                    break;
                }
                for (int q = 0; q < np; q++)
                    if (props[q].kn == kn && memcmp(props[q].k, k, (size_t)kn) == 0)
                        fallback = 1;
                if (fallback)
                    break;
                props[np].k = k, props[np].kn = kn, props[np].v = v, props[np].vn = vn;
                np++;
            }
            if (fallback)
                break;
            for (int q = 0; q < np && !code; q++) {
                const Prop *e = &props[q];
                if (has_sep(e->k, e->kn) || has_sep(e->v, e->vn))
                    code = PROPERTY_SEPARATOR;
                else if (!e->kn || !e->vn)
                    code = PROPERTY_EMPTY;
                else if (is_reserved(e->k, e->kn))
                    code = PROPERTY_RESERVED;
                props_bytes += e->kn + 1 + e->vn + 1;
            }
        }
        if (!code && !bn)
            code = BODY_EMPTY;
        if (!code && bn > max_body)
            code = BODY_TOO_LARGE;
        char suffix[64];
        int suffix_n = 0;
        if (prefix != NULL)
            suffix_n = snprintf(suffix, sizeof(suffix), "-%zd", row_base + i);
        Py_ssize_t keys_total = key_n + (prefix != NULL ? (key_n ? 1 : 0) + prefix_n + suffix_n : 0);
        PyObject *uid = PyList_GET_ITEM(ids, i);
        Py_ssize_t uid_n;
        const char *uid_p = PyUnicode_Check(uid) ? PyUnicode_AsUTF8AndSize(uid, &uid_n) : NULL;
        if (uid_p == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "the id of row %zd is not a str", i);
            goto done;
        }
        Py_ssize_t text_n = (tag_n ? 5 + tag_n + 1 : 0) + (keys_total ? 5 + keys_total + 1 : 0) + 10 + props_bytes +
                            9 + uid_n;
        if (!code && text_n > 32767)
            code = PROPERTIES_TOO_LONG;
        if (code)
            BAD(code)
#undef BAD
        Py_ssize_t g = 0;
        if (have_groups) {
            g = le32((const char *)groups.buf + 4 * i);
            if (g < 0 || g >= ngroups) {
                PyErr_Format(PyExc_ValueError, "group %zd of row %zd is not one of the %zd outputs", g, i, ngroups);
                goto done;
            }
        }
        PyObject *out = PyList_GET_ITEM(outs, g);
        Py_ssize_t total = 20 + bn + 2 + text_n, old = PyByteArray_GET_SIZE(out);
        if (total > INT32_MAX) {
            PyErr_Format(PyExc_ValueError, "the entry of row %zd is over 2 GiB", i);
            goto done;
        }
        if (PyByteArray_Resize(out, old + total) < 0)
            goto done;
        char *o = PyByteArray_AS_STRING(out) + old;
        put_be32(o, (uint32_t)total);
        memset(o + 4, 0, 12); /* MAGIC, BODYCRC, FLAG */
        put_be32(o + 16, (uint32_t)bn);
        o += 20;
        memcpy(o, bp, (size_t)bn);
        o += bn;
        o[0] = (char)(text_n >> 8), o[1] = (char)text_n;
        o += 2;
#define LIT(s) (memcpy(o, s, sizeof(s) - 1), o += sizeof(s) - 1)
#define RAW(p, n) (memcpy(o, p, (size_t)(n)), o += (n))
        if (tag_n) {
            LIT("TAGS\001");
            RAW(tag, tag_n);
            *o++ = 2;
        }
        if (keys_total) {
            LIT("KEYS\001");
            if (key_n)
                RAW(key, key_n);
            if (prefix != NULL) {
                if (key_n)
                    *o++ = ' ';
                RAW(prefix, prefix_n);
                RAW(suffix, suffix_n);
            }
            *o++ = 2;
        }
        LIT("WAIT\001true\002");
        for (int q = 0; q < np; q++) {
            RAW(props[q].k, props[q].kn);
            *o++ = 1;
            RAW(props[q].v, props[q].vn);
            *o++ = 2;
        }
        LIT("UNIQ_KEY\001");
        RAW(uid_p, uid_n);
#undef LIT
#undef RAW
        int64_t entry[2] = {old + total, i};
        if (put(PyList_GET_ITEM(index, g), entry, 16) < 0)
            goto done;
    }
    result = PyLong_FromSsize_t(i);
done:
    col_release(&body);
    col_release(&tags);
    col_release(&keys);
    col_release(&pkeys);
    col_release(&pvals);
    if (have_pvalid)
        PyBuffer_Release(&pvalid);
    if (have_poffs)
        PyBuffer_Release(&poffs);
    if (have_groups)
        PyBuffer_Release(&groups);
    return result;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_O, "configure(reserved): the reserved property names, as bytes"},
    {"encode_rows", encode_rows, METH_VARARGS,
     "encode_rows(body, tags, keys, props, key_suffix, max_body, ids, start, stop, groups, outs, index, bad) -> i: "
     "append the batch entries of rows start..stop-1; the first row left to the Python twin, else stop"},
    {NULL, NULL, 0, NULL}};

TWIN_MODULE("rocketmq_sdk.integrations.spark._cbatch_bodies", "C twin of batch_bodies.py");

PyMODINIT_FUNC PyInit__cbatch_bodies(void) { return PyModule_Create(&module); }
