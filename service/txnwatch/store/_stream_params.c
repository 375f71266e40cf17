/*
 * txnwatch.store._stream_params: the parameters of the tail's multi-row INSERTs of stream rows on SQLite, compiled.
 *
 * Why by hand (issue 25): the transaction-log tail stores one row per record the coordinators write.  On SQLite
 * its writer thread built each row as a Python tuple (store/txnlog.stream_rows: the transition's slices around its
 * two lists joined as text) and then copied the rows of each statement into one flat parameter tuple: 1.0-1.1 us
 * of Python a record, a quarter of the writer's CPU and the part of it that holds the GIL against the thread that
 * fetches and applies.  No library builds a statement's parameters from tuples; this does both steps in one pass.
 *
 * stream_params(head, transitions, start, stop, joined, join) -> tuple: ``head``'s values, then for each
 * core.model.Transition of transitions[start:stop] (a tuple of 18 fields) its first 17 in store/txnlog._STREAM_FIELDS
 * order (the last, ``source``, is the stream's constant one, which the statement holds): the first twelve as they
 * are, the partitions as text (``joined[partitions]`` if cached, else ``join(partitions)``, the Python function that
 * also keeps that cache), the events joined by commas (as ``",".join(events)``), then the next three fields.  The same values, in the same order, as the Python path:
 * tests/store/test_stream_params.py compares the two on random transitions and on the rows they store.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define WIDTH 18       /* core.model.Transition's fields */
#define FIELDS 17      /* the ones a stream row stores: all but the last (source) */
#define PARTITIONS 12  /* its partitions: a tuple of (topic, partition) */
#define EVENTS 13      /* its events: a tuple of str */

static PyObject *comma = NULL, *empty = NULL;

static PyObject *stream_params(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "stream_params(head, transitions, start, stop, joined, join)");
        return NULL;
    }
    PyObject *head = args[0], *joined = args[4], *join = args[5];
    if (!PyTuple_Check(head) || !PyDict_Check(joined) || !PyCallable_Check(join)) {
        PyErr_SetString(PyExc_TypeError, "stream_params: head must be a tuple, joined a dict, join callable");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[2]), stop = PyLong_AsSsize_t(args[3]);
    if ((start == -1 || stop == -1) && PyErr_Occurred()) return NULL;
    PyObject *seq = PySequence_Fast(args[1], "stream_params: transitions must be a sequence");
    if (seq == NULL) return NULL;
    if (start < 0 || stop < start || stop > PySequence_Fast_GET_SIZE(seq)) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_IndexError, "stream_params: start and stop must lie within transitions");
        return NULL;
    }
    Py_ssize_t width = FIELDS, heads = PyTuple_GET_SIZE(head), rows = stop - start;
    PyObject *out = PyTuple_New(heads + rows * width);
    if (out == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < heads; i++) {
        PyObject *v = PyTuple_GET_ITEM(head, i);
        Py_INCREF(v);
        PyTuple_SET_ITEM(out, i, v);
    }
    /* Every slot is filled before anything can fail after it, or left NULL: a tuple with NULL slots is freed
     * correctly (tupledealloc skips them), so an error just drops ``out``. */
    for (Py_ssize_t r = 0; r < rows; r++) {
        /* ``join`` is Python code: a list could change under us meanwhile, so hold the row and look again. */
        if (start + r >= PySequence_Fast_GET_SIZE(seq)) {
            PyErr_SetString(PyExc_RuntimeError, "stream_params: transitions changed size");
            goto fail;
        }
        PyObject *x = PySequence_Fast_ITEMS(seq)[start + r];
        if (!PyTuple_Check(x) || PyTuple_GET_SIZE(x) != WIDTH) {
            PyErr_Format(PyExc_TypeError, "stream_params: transition %zd is not a Transition", start + r);
            goto fail;
        }
        Py_INCREF(x);
        Py_ssize_t at = heads + r * width;
        for (Py_ssize_t j = 0; j < FIELDS; j++) {
            PyObject *v;
            if (j == PARTITIONS) {
                PyObject *partitions = PyTuple_GET_ITEM(x, j);
                v = PyDict_GetItemWithError(joined, partitions);
                if (v != NULL) {
                    Py_INCREF(v);
                } else if (PyErr_Occurred() || (v = PyObject_CallOneArg(join, partitions)) == NULL) {
                    Py_DECREF(x);
                    goto fail;
                }
            } else if (j == EVENTS) {
                PyObject *events = PyTuple_GET_ITEM(x, j);
                if (PyTuple_Check(events) && PyTuple_GET_SIZE(events) == 0) {
                    v = empty;
                    Py_INCREF(v);
                } else if ((v = PyUnicode_Join(comma, events)) == NULL) {
                    Py_DECREF(x);
                    goto fail;
                }
            } else {
                v = PyTuple_GET_ITEM(x, j);
                Py_INCREF(v);
            }
            PyTuple_SET_ITEM(out, at + j, v);
        }
        Py_DECREF(x);
    }
    Py_DECREF(seq);
    return out;
fail:
    Py_DECREF(seq);
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"stream_params", (PyCFunction)(void (*)(void))stream_params, METH_FASTCALL,
     "stream_params(head, transitions, start, stop, joined, join) -> tuple: head's values, then each transition's "
     "values as its stream row binds them (see the C source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stream_params",
                                    "The tail's stream-row INSERT parameters on SQLite, compiled (see the C source).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__stream_params(void) {
    comma = PyUnicode_FromString(",");
    empty = PyUnicode_FromString("");
    if (comma == NULL || empty == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "FIELDS", FIELDS) < 0 || PyModule_AddIntConstant(m, "WIDTH", WIDTH) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
