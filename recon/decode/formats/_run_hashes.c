/* Spark's content hash of a run's records in C (recon.decode.input.dump_input.content_hashes).
 *
 * hashes(keys, values, seed) -> bytes: for each row, `xxhash64(key, value)` as Spark computes
 * it: XXH64 of the key with `seed` (Spark's 42), then of the value with that hash as the seed,
 * a NULL one left out; the rows' hashes as native uint64s. `keys` and `values` are each a
 * list of bytes or None, or `BinaryRows.native` (`_run_values.h`), of one length. A row that
 * is not bytes (past its buffers included) hashes as a NULL: the decode's rows are checked
 * binary Arrow columns, so that is a NULL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_run_values.h"

static PyObject *hashes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    RunValues keys, values;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "hashes takes 3 arguments");
        return NULL;
    }
    unsigned long long seed = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (run_values_open(args[0], &keys) < 0) return NULL;
    if (run_values_open(args[1], &values) < 0) {
        run_values_close(&keys);
        return NULL;
    }
    PyObject *out = NULL;
    if (keys.n != values.n) {
        PyErr_SetString(PyExc_ValueError, "hashes: keys and values of different lengths");
        goto done;
    }
    if (!(out = PyBytes_FromStringAndSize(NULL, keys.n * 8))) goto done;
    char *o = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < keys.n; i++) {
        const uint8_t *p;
        Py_ssize_t len;
        uint64_t h = seed;
        if (run_value(&keys, i, &p, &len)) h = xxh64(p, len, h);
        if (run_value(&values, i, &p, &len)) h = xxh64(p, len, h);
        memcpy(o + 8 * i, &h, 8);
    }
done:
    run_values_close(&keys);
    run_values_close(&values);
    return out;
}

static PyMethodDef methods[] = {
    {"hashes", (PyCFunction)(void (*)(void))hashes, METH_FASTCALL,
     "Spark's xxhash64(key, value) of each row, as native uint64s."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_run_hashes", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__run_hashes(void) { return PyModule_Create(&module); }
