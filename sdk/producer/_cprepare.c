/* C twin of sdk/producer/prepare.py (rocketmq_sdk.producer._cprepare): a producer's
 * SEND_MESSAGE_V2 frame rendered from its per-topic header template (SendRequest.encode's
 * template path, which stays the reference; compared by tests/producer/test_send_request.py).
 */
#include "../_chelpers.h"

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
    w_free(&w);
    Py_DECREF(pieces);
    Py_DECREF(vals);
    if (r == FALLBACK)
        Py_RETURN_NONE;
    return result; /* NULL with an exception when r == FAILED */
}

static PyMethodDef methods[] = {
    {"render_send", (PyCFunction)(void (*)(void))codec_render_send, METH_FASTCALL,
     "render_send(pieces, vals, flag, opaque, body) -> bytes | None: the frame of a templated send request, "
     "or None when the Python encoder must render it."},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_cprepare",
            "C twin of rocketmq_sdk.producer.prepare: SEND_MESSAGE_V2 frames from a header template.");

PyMODINIT_FUNC PyInit__cprepare(void) { return PyModule_Create(&module); }
