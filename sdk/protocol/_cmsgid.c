/* C twin of sdk/protocol/msgid.py (rocketmq_sdk.protocol._cmsgid): the process-wide UNIQ_KEY ids
 * (docs/protocol.md §4.7).
 *
 * msgid.create_uniq_id hands its UniqIdGenerator's state (prefix, month, counter) over with
 * uniq_configure; uniq_create then makes the ids until the month ends (it returns None and the
 * Python generator rolls the month and hands the new state back) or the process forks (the
 * child's at-fork hook calls uniq_configure(None)). Compared by tests/protocol/test_protocol_msgid.py.
 */
#include "../_chelpers.h"
#include <string.h>
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

static PyMethodDef methods[] = {
    {"uniq_configure", codec_uniq_configure, METH_VARARGS,
     "uniq_configure(prefix, start_ms, next_start_ms, counter) | uniq_configure(None): the state of "
     "uniq_create (the process-wide UNIQ_KEY generator's)."},
    {"uniq_create", codec_uniq_create, METH_NOARGS,
     "uniq_create() -> str | None: a UNIQ_KEY id, or None when the Python generator must make it."},
    {NULL, NULL, 0, NULL},
};

TWIN_MODULE("_cmsgid",
            "C twin of rocketmq_sdk.protocol.msgid: the process-wide UNIQ_KEY ids.");

PyMODINIT_FUNC PyInit__cmsgid(void) { return PyModule_Create(&module); }
