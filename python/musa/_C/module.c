/*
 * module.c - the musa._C extension module: types, bound functions, and a
 * few module-level facts. The Python package (python/musa) builds the
 * user-facing API on top.
 */
#include "pymusa.h"

static PyObject *py_op_names(PyObject *m, PyObject *u) {
    (void)m, (void)u;
    int n = musa_op_count();
    PyObject *r = PyTuple_New(n);
    for (int i = 0; r && i < n; i++) PyTuple_SET_ITEM(r, i, PyUnicode_FromString(musa_op_name(i)));
    return r;
}

static PyMethodDef module_functions[] = {
    {"_op_names", py_op_names, METH_NOARGS, "names of the primitive ops in musa's op table"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "musa._C",
    "musa's C core: tensors, ops and autograd.",
    -1,
    module_functions,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (pm_types_init(m) || pm_bindings_add_functions(m) || pm_tensor_type_init(m) ||
        pm_autograd_init(m) || pm_pair_init(m) || pm_jit_init(m) || pm_interrupt_init() ||
        PyModule_AddStringConstant(m, "__version__", "0.1.0") ||
        PyModule_AddIntConstant(m, "_max_dims", MUSA_MAX_DIMS)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
