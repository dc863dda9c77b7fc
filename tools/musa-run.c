/*
 * musa-run - run a saved model (.musa) or an ONNX model (.onnx) on .npy
 * inputs, without Python.
 *
 *     musa-run model.musa --input x.npy [--input ...] [--output y.npy ...]
 *              [--threads N] [--bench N] [--mmap] [--profile TRACE.json]
 *     musa-run model.onnx --input x.npy ...
 *
 * Inputs are given in the model's input order; each --output names the
 * file for the next output (outputs without one are summarised only).
 * --bench N runs N more times after the first and prints the median, mean
 * and fastest time. --profile records every run (each plan instruction,
 * each run as a range) and writes a Chrome trace (Perfetto,
 * chrome://tracing), as musa.profiler's export_chrome_trace does. Exit status: 0, 1 for a failed
 * load or run (the error printed), 2 for a bad command line.
 */
#include <musa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int usage(const char *why) {
    fprintf(
        stderr,
        "musa-run: %s\n"
        "usage: musa-run MODEL.musa|MODEL.onnx --input X.npy [--input ...] [--output Y.npy ...]\n"
        "                [--threads N] [--bench N] [--mmap] [--profile TRACE.json]\n",
        why);
    return 2;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what) {
    fprintf(stderr, "musa-run: %s: %s\n", what, musa_last_error());
    return 1;
}

int main(int argc, char **argv) {
    const char *model = NULL, *in_paths[64], *out_paths[64], *trace = NULL;
    int n_in = 0, n_outp = 0, threads = 0, flags = 0;
    long bench = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--input") || !strcmp(a, "--output")) {
            if (!has_value) return usage("--input and --output take a file name");
            if ((a[2] == 'i' ? n_in : n_outp) == 64) return usage("at most 64 inputs and outputs");
            if (a[2] == 'i')
                in_paths[n_in++] = argv[++i];
            else
                out_paths[n_outp++] = argv[++i];
        } else if (!strcmp(a, "--threads") || !strcmp(a, "--bench")) {
            char *end;
            long v = has_value ? strtol(argv[i + 1], &end, 10) : -1;
            if (!has_value || *end || v < 0 || v > 1000000 || (a[2] == 't' && v < 1))
                return usage(a[2] == 't' ? "--threads takes a count >= 1"
                                         : "--bench takes a count of runs >= 0");
            if (a[2] == 't')
                threads = (int)v;
            else
                bench = v;
            i++;
        } else if (!strcmp(a, "--profile")) {
            if (!has_value) return usage("--profile takes a file name for the trace");
            trace = argv[++i];
        } else if (!strcmp(a, "--mmap")) {
            flags |= MUSA_FILE_MMAP;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage("run a saved model");
            return 0;
        } else if (a[0] == '-' || model) {
            char msg[256];
            snprintf(msg, sizeof msg, "unexpected argument '%.200s'", a);
            return usage(msg);
        } else {
            model = a;
        }
    }
    if (!model) return usage("no model file given");
    if (threads && musa_set_num_threads(threads)) return fail("--threads");
    musa_model *m = musa_model_load(model, flags);
    if (!m) return fail("loading the model");
    int status = 0, no = musa_model_num_outputs(m);
    musa_tensor *in[64] = {NULL}, **out = calloc((size_t)no + 1, sizeof *out);
    double *times = bench ? malloc(sizeof(double) * (size_t)bench) : NULL;
    if (!out || (bench && !times)) {
        fprintf(stderr, "musa-run: out of memory\n");
        status = 1;
        goto done;
    }
    if (n_in != musa_model_num_inputs(m)) {
        fprintf(stderr, "musa-run: the model takes %d inputs, %d given\n", musa_model_num_inputs(m),
                n_in);
        status = 2;
        goto done;
    }
    if (n_outp > no) {
        fprintf(stderr, "musa-run: the model has %d outputs, %d --output files given\n", no,
                n_outp);
        status = 2;
        goto done;
    }
    for (int i = 0; i < n_in; i++)
        if (!(in[i] = musa_npy_load(in_paths[i]))) {
            status = fail(in_paths[i]);
            goto done;
        }
    if (trace && musa_profiler_start(MUSA_PROFILE_SHAPES)) {
        status = fail("--profile");
        goto done;
    }
    double t0 = now();
    int64_t range = musa_profiler_range_begin();
    int rc0 = musa_model_run(m, n_in, in, no, out);
    musa_profiler_range_end("musa_model_run", range);
    if (rc0) {
        status = fail("running the model");
        goto done;
    }
    double first = now() - t0;
    for (int j = 0; j < no; j++) {
        char shape[160] = "";
        const int64_t *dims = musa_tensor_shape(out[j]);
        int nd = musa_tensor_ndim(out[j]);
        for (int d = 0, k = 0; d < nd; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%lld", d ? ", " : "",
                          (long long)dims[d]);
        printf("output %d: %s[%s]%s%s\n", j, musa_dtype_name(musa_tensor_dtype(out[j])), shape,
               j < n_outp ? " -> " : "", j < n_outp ? out_paths[j] : "");
        if (j < n_outp && musa_npy_save(out_paths[j], out[j])) {
            status = fail(out_paths[j]);
            goto done;
        }
    }
    if (bench) {
        for (long r = 0; r < bench; r++) {
            musa_tensor **o2 = calloc((size_t)no + 1, sizeof *o2);
            double t = now();
            range = musa_profiler_range_begin();
            int rc = o2 ? musa_model_run(m, n_in, in, no, o2) : MUSA_ERR_NOMEM;
            musa_profiler_range_end("musa_model_run", range);
            times[r] = now() - t;
            for (int j = 0; o2 && j < no; j++) musa_tensor_release(o2[j]);
            free(o2);
            if (rc) {
                status = fail("running the model");
                goto done;
            }
        }
        double sum = 0;
        for (long r = 0; r < bench; r++) sum += times[r];
        qsort(times, (size_t)bench, sizeof *times, cmp_double);
        printf("first run %.3f ms (plans built); %ld runs: median %.3f ms, mean %.3f ms, "
               "min %.3f ms (%d threads)\n",
               first * 1e3, bench, times[bench / 2] * 1e3, sum / (double)bench * 1e3,
               times[0] * 1e3, musa_get_num_threads());
    }
    if (trace) {
        if (musa_profiler_stop() || musa_profiler_write_chrome_trace(trace)) {
            status = fail("--profile");
            goto done;
        }
        printf("profile: %lld events -> %s\n", (long long)musa_profiler_num_events(), trace);
    }
done:
    if (musa_profiler_enabled()) musa_profiler_stop();
    for (int i = 0; i < n_in; i++) musa_tensor_release(in[i]);
    for (int j = 0; out && j < no; j++) musa_tensor_release(out[j]);
    free(out);
    free(times);
    musa_model_free(m);
    return status;
}
