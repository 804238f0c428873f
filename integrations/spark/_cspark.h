/* Helpers shared by the Spark integration's C twins (_carrow_records.c, _cbatch_bodies.c), included after
 * sdk/_chelpers.h: RocketMQ's reserved property names (handed over once by the Python module) and appending
 * to a bytearray. Everything is static: each twin is its own extension module with its own copy. */
#ifndef ROCKETMQ_SPARK_CSPARK_H
#define ROCKETMQ_SPARK_CSPARK_H

#define MAX_RESERVED 128

static struct {
    const char *name;
    Py_ssize_t len;
} reserved[MAX_RESERVED];
static int reserved_count = 0;
static PyObject *reserved_keep = NULL; /* the list configure() got: keeps the names alive */

/* configure(reserved): the reserved property names, a list of bytes */
static PyObject *configure(PyObject *self, PyObject *arg) {
    if (!PyList_Check(arg) || PyList_GET_SIZE(arg) > MAX_RESERVED) {
        PyErr_SetString(PyExc_TypeError, "configure() takes a list of at most 128 bytes names");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(arg); i++)
        if (!PyBytes_CheckExact(PyList_GET_ITEM(arg, i))) {
            PyErr_SetString(PyExc_TypeError, "configure() takes bytes names");
            return NULL;
        }
    Py_XSETREF(reserved_keep, Py_NewRef(arg));
    reserved_count = (int)PyList_GET_SIZE(arg);
    for (int i = 0; i < reserved_count; i++) {
        reserved[i].name = PyBytes_AS_STRING(PyList_GET_ITEM(arg, i));
        reserved[i].len = PyBytes_GET_SIZE(PyList_GET_ITEM(arg, i));
    }
    Py_RETURN_NONE;
}

HELPER int is_reserved(const void *k, Py_ssize_t n) {
    for (int i = 0; i < reserved_count; i++)
        if (reserved[i].len == n && memcmp(reserved[i].name, k, (size_t)n) == 0)
            return 1;
    return 0;
}

/* append n bytes to a bytearray (which over-allocates as it grows); -1 with MemoryError */
static inline int put(PyObject *ba, const void *p, Py_ssize_t n) {
    Py_ssize_t old = PyByteArray_GET_SIZE(ba);
    if (PyByteArray_Resize(ba, old + n) < 0)
        return -1;
    if (n)
        memcpy(PyByteArray_AS_STRING(ba) + old, p, (size_t)n);
    return 0;
}

#endif /* ROCKETMQ_SPARK_CSPARK_H */
