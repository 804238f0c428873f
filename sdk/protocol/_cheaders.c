/* C twin of sdk/protocol/headers.py (rocketmq_sdk.protocol._cheaders): the typed headers' reader.
 *
 * headers.py compiles one reader per header class (_compile_reader); this module reads the same
 * fields from a command's extFields in one call. Compared by tests/protocol/test_cheaders.py.
 *
 *   read_header(cls, ext, fields) -> cls instance | None
 */
#include "../_chelpers.h"

enum { K_STR = 0, K_INT = 1, K_BOOL = 2, K_BOOL_OR_ONE = 3 }; /* headers.py's field kinds */

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

static PyMethodDef methods[] = {
    {"read_header", (PyCFunction)(void (*)(void))codec_read_header, METH_FASTCALL,
     "read_header(cls, ext, fields) -> header | None: a typed header read from extFields; fields is "
     "a tuple of (attr, key or None, kind 0 str / 1 int / 2 bool / 3 bool-or-1, default, parser)."},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_cheaders",
            "C twin of rocketmq_sdk.protocol.headers: the typed headers' reader.");

PyMODINIT_FUNC PyInit__cheaders(void) { return PyModule_Create(&module); }
