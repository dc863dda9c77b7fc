/*
 * stream.c - streams and events (musa_stream_*, musa_event_* in musa.h) for
 * musa.Stream and musa.Event (python/musa/streams.py): handles as capsules;
 * None is the default stream. Waits release the GIL: a stream's worker
 * never needs it, and other Python threads may run meanwhile.
 */
#include "pymusa.h"

static const char *STREAM = "musa.stream", *EVENT = "musa.event";

static void stream_cap_free(PyObject *cap) {
    musa_stream_free(PyCapsule_GetPointer(cap, STREAM)); /* waits for its work */
}

static void event_cap_free(PyObject *cap) {
    musa_event_free(PyCapsule_GetPointer(cap, EVENT));
}

/* The stream a capsule holds, NULL for None (the default stream); false
 * with a TypeError for anything else. */
static bool stream_of(PyObject *o, const char *who, musa_stream **s) {
    *s = NULL;
    if (o == Py_None) return true;
    if (PyCapsule_IsValid(o, STREAM)) {
        *s = PyCapsule_GetPointer(o, STREAM);
        return true;
    }
    PyErr_Format(PyExc_TypeError, "[%s] expected a musa.Stream, got %s", who, Py_TYPE(o)->tp_name);
    return false;
}

static musa_event *event_of(PyObject *o, const char *who) {
    musa_event *e = PyCapsule_IsValid(o, EVENT) ? PyCapsule_GetPointer(o, EVENT) : NULL;
    if (!e) PyErr_Format(PyExc_TypeError, "[%s] expected a musa.Event", who);
    return e;
}

DEF(_stream_new, PM_FN, "threads:i") {
    if (a[0].i < 1 || a[0].i > 256)
        return PyErr_Format(PyExc_ValueError, "[Stream] threads must be 1 to 256, got %lld",
                            (long long)a[0].i);
    musa_stream *s = musa_stream_new((int)a[0].i);
    if (!s) return pm_raise();
    PyObject *cap = PyCapsule_New(s, STREAM, stream_cap_free);
    if (!cap) musa_stream_free(s);
    return cap;
}

DEF(_stream_id, PM_FN, "s:O") {
    musa_stream *s;
    if (!stream_of(a[0].o, who, &s)) return NULL;
    return PyLong_FromUnsignedLongLong(musa_stream_id(s));
}

/* Make s current on this thread; returns nothing (the Python layer keeps
 * the stack of current Stream objects). */
DEF(_stream_set_current, PM_FN, "s:O") {
    musa_stream *s;
    if (!stream_of(a[0].o, who, &s)) return NULL;
    musa_stream_set_current(s);
    Py_RETURN_NONE;
}

DEF(_stream_synchronize, PM_FN, "s:O") {
    musa_stream *s;
    if (!stream_of(a[0].o, who, &s)) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_stream_synchronize(s);
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}

DEF(_stream_query, PM_FN, "s:O") {
    musa_stream *s;
    if (!stream_of(a[0].o, who, &s)) return NULL;
    return PyBool_FromLong(musa_stream_query(s));
}

DEF(_stream_wait_stream, PM_FN, "s:O other:O") {
    musa_stream *s, *o;
    if (!stream_of(a[0].o, who, &s) || !stream_of(a[1].o, who, &o)) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_stream_wait_stream(s, o);
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}

DEF(_synchronize, PM_FN, "") {
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_synchronize();
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}

DEF(_event_new, PM_FN, "enable_timing:b") {
    musa_event *e = musa_event_new(a[0].b);
    if (!e) return pm_raise();
    PyObject *cap = PyCapsule_New(e, EVENT, event_cap_free);
    if (!cap) musa_event_free(e);
    return cap;
}

DEF(_event_record, PM_FN, "e:O s:O") {
    musa_event *e = event_of(a[0].o, who);
    musa_stream *s;
    if (!e || !stream_of(a[1].o, who, &s)) return NULL;
    return pm_none_or_raise(musa_event_record(e, s));
}

DEF(_event_query, PM_FN, "e:O") {
    musa_event *e = event_of(a[0].o, who);
    return e ? PyBool_FromLong(musa_event_query(e)) : NULL;
}

DEF(_event_synchronize, PM_FN, "e:O") {
    musa_event *e = event_of(a[0].o, who);
    if (!e) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_event_synchronize(e);
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}

DEF(_stream_wait_event, PM_FN, "s:O e:O") {
    musa_stream *s;
    if (!stream_of(a[0].o, who, &s)) return NULL;
    musa_event *e = event_of(a[1].o, who);
    if (!e) return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = musa_stream_wait_event(s, e);
    Py_END_ALLOW_THREADS return pm_none_or_raise(rc);
}

DEF(_event_elapsed_time, PM_FN, "start:O end:O") {
    musa_event *s = event_of(a[0].o, who), *e = s ? event_of(a[1].o, who) : NULL;
    if (!e) return NULL;
    double ms;
    int rc = musa_event_elapsed_time(s, e, &ms);
    return rc ? pm_raise() : PyFloat_FromDouble(ms);
}
