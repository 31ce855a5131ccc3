/* fsync_all: fsync many descriptors side by side, holding the GIL only to start and to finish.

   zkcoord.log.syncer issues a group-commit round's fsyncs (one per offsets partition with appends waiting)
   together, as a filesystem's journal commits concurrent fsyncs together. From Python, each fsync's thread
   needs the GIL again when its fsync returns; with the node's event loop busy, each waited for the loop to let
   go of it, and a round of fifty fsyncs took several switch intervals. Here one call releases the GIL, runs the
   fsyncs on threads of its own and waits for them all. Built by setup.py where a C compiler is; without it the
   syncer runs its fsyncs on Python threads. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    int fd;
    int error; /* errno of a failed fsync, 0 if it succeeded */
} Job;

static void *run_fsync(void *arg) {
    Job *job = arg;
    job->error = fsync(job->fd) == 0 ? 0 : errno;
    return NULL;
}

/* fsync_all(fds) -> list of errno values, 0 for each fsync that succeeded, in the order of fds. */
static PyObject *fsync_all(PyObject *self, PyObject *arg) {
    PyObject *sequence = PySequence_Fast(arg, "fsync_all needs a sequence of file descriptors");
    if (sequence == NULL) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
    Job *jobs = calloc(count > 0 ? count : 1, sizeof(Job));
    pthread_t *threads = calloc(count > 0 ? count : 1, sizeof(pthread_t));
    char *started = calloc(count > 0 ? count : 1, 1);
    if (jobs == NULL || threads == NULL || started == NULL) {
        free(jobs), free(threads), free(started);
        Py_DECREF(sequence);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(sequence, i));
        if (fd == -1 && PyErr_Occurred()) {
            free(jobs), free(threads), free(started);
            Py_DECREF(sequence);
            return NULL;
        }
        jobs[i].fd = fd;
    }
    Py_DECREF(sequence);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 1; i < count; i++) /* the first runs on this thread */
        started[i] = pthread_create(&threads[i], NULL, run_fsync, &jobs[i]) == 0;
    if (count > 0) run_fsync(&jobs[0]);
    for (Py_ssize_t i = 1; i < count; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        else
            run_fsync(&jobs[i]); /* no thread to spare: here, one after another */
    }
    Py_END_ALLOW_THREADS
    PyObject *errors = PyList_New(count);
    for (Py_ssize_t i = 0; errors != NULL && i < count; i++) {
        PyObject *error = PyLong_FromLong(jobs[i].error);
        if (error == NULL) Py_CLEAR(errors);
        else PyList_SET_ITEM(errors, i, error);
    }
    free(jobs), free(threads), free(started);
    return errors;
}

static PyMethodDef methods[] = {
    {"fsync_all", fsync_all, METH_O, "fsync every descriptor side by side; the errno of each, 0 if it succeeded."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_fsync", .m_doc = "fsyncs side by side without the GIL.", .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__fsync(void) { return PyModule_Create(&module); }
