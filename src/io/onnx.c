/*
 * onnx.c - ONNX models in C, reading: parsing a ModelProto (protobuf-c on
 * the schema of onnx/onnx.proto) and validating all of it before any tensor
 * is allocated, then the initializers as tensors. onnx_build.c captures a
 * loaded model into a musa graph per input signature; onnx_ops_*.c hold the
 * ops. model.c loads .onnx files through here and runs the graphs as it
 * runs a .musa model's.
 */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tensor/tensor.h"

#ifdef MUSA_HAVE_ONNX
#include "onnx_model.h"

/* ---- errors ---- */

static int bad(const musa_onnx *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(const musa_onnx *o, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return musa_err(MUSA_ERR_IO, "%s: %s", o->where, msg);
}

const char *onnx_node_name(const onnx_node *n) {
    if (n->p->name && n->p->name[0]) return n->p->name;
    return n->p->n_output && n->p->output[0][0] ? n->p->output[0] : "(unnamed)";
}

const char *onnx_node_op(const onnx_node *n) {
    return n->p->op_type;
}

/* ---- names ---- */

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h | 1; /* never 0 */
}

static int32_t value_id(const musa_onnx *o, const char *name) {
    const uint64_t *v = musa_map_get(&o->by_name, hash_name(name));
    return v && !strcmp(o->names[*v], name) ? (int32_t)*v : -1;
}

/* A new value named `name` (unique), its id into *id. */
static int new_value(musa_onnx *o, const char *name, const char *what, int32_t *id) {
    if (!name || !name[0]) return bad(o, "%s has an empty name", what);
    uint64_t h = hash_name(name);
    const uint64_t *v = musa_map_get(&o->by_name, h);
    if (v && !strcmp(o->names[*v], name))
        return bad(o, "%s names '%.100s', a value defined already (names must be unique)", what,
                   name);
    if (v)
        return bad(o, "%s: the names '%.100s' and '%.100s' hash alike", what, name, o->names[*v]);
    if (o->n_values == MAX_VALUES) return bad(o, "more than %d values", MAX_VALUES);
    *id = o->n_values;
    o->names[o->n_values++] = name;
    return musa_map_put(&o->by_name, h, (uint64_t)*id) ? musa_err_nomem("onnx", 64) : MUSA_OK;
}

/* ---- dtypes and tensors ---- */

int musa_onnx_dtype(int64_t code) {
    switch (code) {
    case 1:
        return MUSA_DTYPE_FLOAT32;
    case 2:
        return MUSA_DTYPE_UINT8;
    case 3:
        return MUSA_DTYPE_INT8;
    case 5:
        return MUSA_DTYPE_INT16;
    case 6:
        return MUSA_DTYPE_INT32;
    case 7:
        return MUSA_DTYPE_INT64;
    case 9:
        return MUSA_DTYPE_BOOL;
    case 10:
        return MUSA_DTYPE_FLOAT16;
    case 11:
        return MUSA_DTYPE_FLOAT64;
    case 16:
        return MUSA_DTYPE_BFLOAT16;
    default:
        return -1;
    }
}

static const char *onnx_type_name(int64_t code) {
    static const char *names[] = {"UNDEFINED",  "FLOAT",   "UINT8",  "INT8",   "UINT16",
                                  "INT16",      "INT32",   "INT64",  "STRING", "BOOL",
                                  "FLOAT16",    "DOUBLE",  "UINT32", "UINT64", "COMPLEX64",
                                  "COMPLEX128", "BFLOAT16"};
    return code >= 0 && code < (int64_t)(sizeof names / sizeof *names) ? names[code] : "unknown";
}

static bool safe_relative(const char *p) {
    if (!p[0] || p[0] == '/') return false;
    for (const char *s = p; *s;) { /* no ".." component */
        const char *e = strchr(s, '/');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len == 2 && s[0] == '.' && s[1] == '.') return false;
        if (!e) break;
        s = e + 1;
    }
    return true;
}

/* Where an external tensor's bytes are: the file (resolved inside the
 * model's folder), offset and length. Checks only; opens nothing but a stat. */
static int external_of(const musa_onnx *o, const Onnx__TensorProto *t, const char *what, char *path,
                       size_t path_size, int64_t *offset, int64_t *length) {
    const char *loc = NULL;
    *offset = 0, *length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        const char *k = e->key ? e->key : "", *v = e->value ? e->value : "";
        if (!strcmp(k, "location")) {
            loc = v;
        } else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
            char *end;
            errno = 0;
            long long x = strtoll(v, &end, 10);
            if (!v[0] || *end || errno || x < 0)
                return bad(o, "%s: external data %s '%.40s' is not a size", what, k, v);
            *(k[0] == 'o' ? offset : length) = x;
        }
    }
    if (!loc) return bad(o, "%s: external data without a location", what);
    if (!o->dir)
        return bad(o, "%s: external data ('%.100s') needs the model's file, not bytes in memory",
                   what, loc);
    if (!safe_relative(loc))
        return bad(o, "%s: external data location '%.100s' is outside the model's folder", what,
                   loc);
    char joined[PATH_MAX], real_dir[PATH_MAX];
    if (snprintf(joined, sizeof joined, "%s/%s", o->dir, loc) >= (int)sizeof joined ||
        !realpath(o->dir, real_dir))
        return bad(o, "%s: external data path '%.100s' is too long", what, loc);
    if (!realpath(joined, path) || strlen(path) >= path_size)
        return bad(o, "%s: external data file '%.100s': %s", what, loc, strerror(errno));
    size_t nd = strlen(real_dir);
    if (strncmp(path, real_dir, nd) || path[nd] != '/')
        return bad(o, "%s: external data '%.100s' resolves outside the model's folder", what, loc);
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode))
        return bad(o, "%s: external data '%.100s' is not a regular file", what, loc);
    if (*offset > st.st_size) return bad(o, "%s: external data offset past the file's end", what);
    if (*length < 0) *length = st.st_size - *offset;
    if (*length > st.st_size - *offset)
        return bad(o, "%s: external data '%.100s' holds %lld bytes from offset %lld, %lld asked",
                   what, loc, (long long)(st.st_size - *offset), (long long)*offset,
                   (long long)*length);
    return MUSA_OK;
}

/* Check tensor t (an initializer or an attribute's) before anything is
 * allocated: dtype, dims, and data that fills them exactly. */
static int check_tensor(const musa_onnx *o, const Onnx__TensorProto *t, const char *what,
                        int64_t *numel_out) {
    int dt = t->has_data_type ? musa_onnx_dtype(t->data_type) : -1;
    if (dt < 0)
        return bad(o, "%s has ONNX type %s (%d), which musa does not have", what,
                   onnx_type_name(t->data_type), t->has_data_type ? (int)t->data_type : 0);
    if (t->n_dims > MUSA_MAX_DIMS)
        return bad(o, "%s has %zu dims, more than musa's %d", what, t->n_dims, MUSA_MAX_DIMS);
    if (t->segment) return bad(o, "%s is a segment of a tensor, which musa does not read", what);
    int64_t numel = 1;
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !musa_mul_i64(numel, t->dims[i], &numel))
            return bad(o, "%s: dim %zu is %lld (dims must be >= 0 and their product fit 64 bits)",
                       what, i, (long long)t->dims[i]);
    size_t item = musa_dtype_size((musa_dtype)dt), need;
    if (!musa_mul_size((size_t)numel, item, &need) || need > ((size_t)1 << 46))
        return bad(o, "%s: %lld elements are too many", what, (long long)numel);
    *numel_out = numel;
    if (t->has_data_location && t->data_location == 1) {
        char path[PATH_MAX];
        int64_t off, len;
        int rc = external_of(o, t, what, path, sizeof path, &off, &len);
        if (rc) return rc;
        if ((size_t)len != need)
            return bad(o, "%s: external data holds %lld bytes; %lld elements of %s need %zu", what,
                       (long long)len, (long long)numel, onnx_type_name(t->data_type), need);
        return MUSA_OK;
    }
    if (t->has_data_location && t->data_location != 0)
        return bad(o, "%s: data_location %d is not DEFAULT (0) or EXTERNAL (1)", what,
                   (int)t->data_location);
    if (t->has_raw_data) {
        if (t->raw_data.len != need)
            return bad(o, "%s: raw_data holds %zu bytes; %lld elements of %s need %zu", what,
                       t->raw_data.len, (long long)numel, onnx_type_name(t->data_type), need);
        return MUSA_OK;
    }
    size_t have;
    switch (t->data_type) {
    case 1:
        have = t->n_float_data;
        break;
    case 7:
        have = t->n_int64_data;
        break;
    case 11:
        have = t->n_double_data;
        break;
    default:
        have = t->n_int32_data;
        break; /* the narrow types, float16, bfloat16, bool */
    }
    if (have != (size_t)numel)
        return bad(o, "%s: its data holds %zu values; dims %s need %lld", what, have,
                   t->n_dims ? "given" : "() (a scalar)", (long long)numel);
    return MUSA_OK;
}

/* A musa tensor of checked TensorProto t (NULL and an error on failure). */
musa_tensor *onnx_make_tensor(const musa_onnx *o, const Onnx__TensorProto *t, const char *what) {
    musa_dtype dt = (musa_dtype)musa_onnx_dtype(t->data_type);
    int64_t shape[MUSA_MAX_DIMS];
    for (size_t i = 0; i < t->n_dims; i++) shape[i] = t->dims[i];
    uint32_t epoch = musa_tensor_epoch;
    musa_tensor_epoch = 0; /* made outside any capture's ops: a parameter */
    musa_tensor *x = musa_empty((int)t->n_dims, shape, dt);
    musa_tensor_epoch = epoch;
    if (!x) return NULL;
    size_t n = (size_t)musa_tensor_numel(x), item = musa_dtype_size(dt);
    unsigned char *d = musa_tensor_data(x);
    int rc = MUSA_OK;
    if (t->has_data_location && t->data_location == 1) {
        char path[PATH_MAX];
        int64_t off, len;
        rc = external_of(o, t, what, path, sizeof path, &off, &len);
        int fd = rc ? -1 : open(path, O_RDONLY | O_CLOEXEC);
        if (!rc && fd < 0)
            rc = bad(o, "%s: cannot open its external data: %s", what, strerror(errno));
        for (size_t done = 0; !rc && done < n * item;) {
            ssize_t r = pread(fd, d + done, n * item - done, (off_t)(off + (int64_t)done));
            if (r <= 0) rc = bad(o, "%s: reading its external data failed", what);
            done += r > 0 ? (size_t)r : 0;
        }
        if (fd >= 0) close(fd);
    } else if (t->has_raw_data) {
        memcpy(d, t->raw_data.data, n * item);
    } else {
        for (size_t i = 0; i < n; i++) switch (dt) {
            case MUSA_DTYPE_FLOAT32:
                ((float *)d)[i] = t->float_data[i];
                break;
            case MUSA_DTYPE_FLOAT64:
                ((double *)d)[i] = t->double_data[i];
                break;
            case MUSA_DTYPE_INT64:
                ((int64_t *)d)[i] = t->int64_data[i];
                break;
            case MUSA_DTYPE_INT32:
                ((int32_t *)d)[i] = t->int32_data[i];
                break;
            case MUSA_DTYPE_INT8:
                ((int8_t *)d)[i] = (int8_t)t->int32_data[i];
                break;
            case MUSA_DTYPE_UINT8:
                ((uint8_t *)d)[i] = (uint8_t)t->int32_data[i];
                break;
            case MUSA_DTYPE_BOOL:
                ((uint8_t *)d)[i] = t->int32_data[i] != 0;
                break;
            default:
                ((uint16_t *)d)[i] = (uint16_t)t->int32_data[i];
                break; /* 16-bit floats */
            }
    }
    if (dt == MUSA_DTYPE_BOOL) /* any nonzero byte is true */
        for (size_t i = 0; i < n; i++) d[i] = d[i] != 0;
    if (rc) {
        musa_tensor_release(x);
        return NULL;
    }
    return x;
}

/* The type code a spec letter stands for ("i", "ints", ...), or -1. */
static int spec_type(const char *s, size_t len) {
    static const struct {
        const char *s;
        int type;
    } map[] = {{"i", A_INT},     {"f", A_FLOAT},       {"s", A_STRING},       {"t", A_TENSOR},
               {"ints", A_INTS}, {"floats", A_FLOATS}, {"strings", A_STRINGS}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++)
        if (strlen(map[i].s) == len && !memcmp(map[i].s, s, len)) return map[i].type;
    return -1;
}

static const char *attr_type_name(int type) {
    static const char *names[] = {"UNDEFINED",      "FLOAT",      "INT",        "STRING",
                                  "TENSOR",         "GRAPH",      "FLOATS",     "INTS",
                                  "STRINGS",        "TENSORS",    "GRAPHS",     "SPARSE_TENSOR",
                                  "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS"};
    return type >= 0 && type < (int)(sizeof names / sizeof *names) ? names[type] : "unknown";
}

/* Attribute a of node n against its op's spec. */
static int check_attr(const musa_onnx *o, const onnx_node *n, const Onnx__AttributeProto *a) {
    const char *name = a->name ? a->name : "";
    char who[200];
    snprintf(who, sizeof who, "node '%.80s' (%s)", onnx_node_name(n), onnx_node_op(n));
    if (a->ref_attr_name && a->ref_attr_name[0])
        return bad(o, "%s: attribute '%.60s' refers to a function's attribute", who, name);
    int type = a->has_type ? a->type : 0;
    if (type == A_GRAPH || type == 10)
        return bad(o,
                   "%s: attribute '%.60s' holds a subgraph; musa's importer takes none "
                   "(control flow is not supported)",
                   who, name);
    for (const char *s = n->op->attrs; s && *s;) {
        const char *colon = strchr(s, ':'), *end = strchr(s, ',');
        if (!end) end = s + strlen(s);
        if ((size_t)(colon - s) == strlen(name) && !memcmp(s, name, strlen(name))) {
            int want = spec_type(colon + 1, (size_t)(end - colon - 1));
            if (type != want)
                return bad(o, "%s: attribute '%.60s' is %s; %s takes %s", who, name,
                           attr_type_name(type), onnx_node_op(n), attr_type_name(want));
            if (type == A_TENSOR && !a->t)
                return bad(o, "%s: attribute '%.60s' holds no tensor", who, name);
            if (type == A_STRING && a->s.len && memchr(a->s.data, 0, a->s.len))
                return bad(o, "%s: attribute '%.60s' holds a NUL byte", who, name);
            if (type == A_TENSOR) {
                char what[300];
                int64_t numel;
                snprintf(what, sizeof what, "%s attribute '%.60s'", who, name);
                return check_tensor(o, a->t, what, &numel);
            }
            return MUSA_OK;
        }
        s = *end ? end + 1 : end;
    }
    return bad(o, "%s: attribute '%.60s' is not one musa's importer knows for %s (it knows: %s)",
               who, name, onnx_node_op(n), n->op->attrs && n->op->attrs[0] ? n->op->attrs : "none");
}

/* ---- reading and validating ---- */

void musa_onnx_free(musa_onnx *o) {
    if (!o) return;
    if (o->consts)
        for (int i = 0; i < o->n_values; i++) musa_tensor_release(o->consts[i]);
    for (int i = 0; o->nodes && i < o->n_nodes; i++) free(o->nodes[i].in);
    free(o->nodes), free(o->consts), free(o->names), free(o->inputs), free(o->outputs);
    musa_map_free(&o->by_name);
    if (o->proto) onnx__model_proto__free_unpacked(o->proto, NULL);
    free(o->where), free(o->dir);
    free(o);
}

static const struct {
    const onnx_op *rows;
    const int *n;
} op_files[] = {{onnx_ops_math, &onnx_ops_math_n},
                {onnx_ops_conv, &onnx_ops_conv_n},
                {onnx_ops_nn, &onnx_ops_nn_n},
                {onnx_ops_shape, &onnx_ops_shape_n}};

/* Row i of the whole table (the files' rows in order), or NULL. */
static const onnx_op *op_row(int i) {
    for (size_t f = 0; i >= 0 && f < sizeof op_files / sizeof *op_files; f++) {
        if (i < *op_files[f].n) return &op_files[f].rows[i];
        i -= *op_files[f].n;
    }
    return NULL;
}

const char *musa_onnx_op(int i) {
    const onnx_op *r = op_row(i);
    return r ? r->name : NULL;
}

const onnx_op *onnx_find_op(const char *name) {
    for (int i = 0; op_row(i); i++)
        if (!strcmp(op_row(i)->name, name)) return op_row(i);
    return NULL;
}

static int read_opset(musa_onnx *o) {
    const Onnx__ModelProto *m = o->proto;
    o->opset = -1;
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *d = m->opset_import[i]->domain ? m->opset_import[i]->domain : "";
        if (!d[0] || !strcmp(d, "ai.onnx")) o->opset = m->opset_import[i]->version;
    }
    if (o->opset < 0) return bad(o, "the model imports no opset of the ONNX domain");
    if (o->opset < OPSET_MIN || o->opset > OPSET_MAX)
        return bad(o, "the model uses ONNX opset %lld; musa's importer reads opsets %d to %d",
                   (long long)o->opset, OPSET_MIN, OPSET_MAX);
    return MUSA_OK;
}

static int read_input(musa_onnx *o, const Onnx__ValueInfoProto *v, onnx_input *in) {
    const char *name = v->name ? v->name : "";
    const Onnx__TypeProto__Tensor *tt = v->type ? v->type->tensor_type : NULL;
    if (!tt)
        return bad(
            o, "input '%.100s' is not a tensor (sequences, maps and optionals are not supported)",
            name);
    int dt = tt->has_elem_type ? musa_onnx_dtype(tt->elem_type) : -1;
    if (dt < 0)
        return bad(o, "input '%.100s' has ONNX type %s, which musa does not have", name,
                   onnx_type_name(tt->elem_type));
    if (!tt->shape)
        return bad(o, "input '%.100s' has no shape; musa needs at least its rank", name);
    if (tt->shape->n_dim > MUSA_MAX_DIMS)
        return bad(o, "input '%.100s' has %zu dims, more than musa's %d", name, tt->shape->n_dim,
                   MUSA_MAX_DIMS);
    in->name = name;
    in->dtype = (musa_dtype)dt;
    in->ndim = (int)tt->shape->n_dim;
    for (int d = 0; d < in->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        in->dims[d] = dim->has_dim_value ? dim->dim_value : -1;
        in->params[d] =
            !dim->has_dim_value && dim->dim_param && dim->dim_param[0] ? dim->dim_param : NULL;
        if (dim->has_dim_value && dim->dim_value < 0)
            return bad(o, "input '%.100s' dim %d is %lld", name, d, (long long)dim->dim_value);
    }
    return MUSA_OK;
}

static int read_node(musa_onnx *o, const Onnx__NodeProto *p, onnx_node *n) {
    n->p = p;
    const char *op = p->op_type ? p->op_type : "";
    const char *dom = p->domain ? p->domain : "";
    char who[200];
    snprintf(who, sizeof who, "node '%.80s' (%.60s)", onnx_node_name(n), op);
    if (dom[0] && strcmp(dom, "ai.onnx"))
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "%s: %s: op %.60s of domain '%.60s' is not supported by musa's importer "
                        "(it reads the ONNX domain)",
                        o->where, who, op, dom);
    if (!(n->op = onnx_find_op(op)))
        return musa_err(MUSA_ERR_NOT_IMPLEMENTED,
                        "%s: %s: op %.60s (domain '', opset %lld) is not supported by musa's C "
                        "importer",
                        o->where, who, op, (long long)o->opset);
    if (p->n_input > MAX_NODE_ARGS || p->n_output > MAX_NODE_ARGS)
        return bad(o, "%s has more than %d inputs or outputs", who, MAX_NODE_ARGS);
    n->n_in = (int)p->n_input, n->n_out = (int)p->n_output;
    if (n->n_in < n->op->in_min || (n->op->in_max >= 0 && n->n_in > n->op->in_max))
        return bad(o, "%s has %d inputs; %s takes %d to %d", who, n->n_in, op, n->op->in_min,
                   n->op->in_max);
    if (n->n_out < n->op->out_min || n->n_out > n->op->out_max)
        return bad(o, "%s has %d outputs; %s makes %d to %d", who, n->n_out, op, n->op->out_min,
                   n->op->out_max);
    for (size_t i = 0; i < p->n_attribute; i++) {
        int rc = check_attr(o, n, p->attribute[i]);
        if (rc) return rc;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(p->attribute[i]->name ? p->attribute[i]->name : "",
                        p->attribute[j]->name ? p->attribute[j]->name : ""))
                return bad(o, "%s has attribute '%.60s' twice", who, p->attribute[i]->name);
    }
    n->in = malloc(sizeof(int32_t) * ((size_t)n->n_in + (size_t)n->n_out + 1));
    if (!n->in) return musa_err_nomem("onnx", 64);
    n->out = n->in + n->n_in;
    for (int i = 0; i < n->n_in; i++) {
        const char *name = p->input[i];
        if (!name[0] && (i < n->op->in_min || n->op->in_max < 0))
            return bad(o, "%s: input %d is required but its name is empty", who, i);
        n->in[i] = name[0] ? value_id(o, name) : -1;
        if (name[0] && n->in[i] < 0)
            return bad(o,
                       "%s reads '%.100s', which no input, initializer or earlier node makes "
                       "(nodes must be in topological order; a cycle never is)",
                       who, name);
    }
    for (int j = 0; j < n->n_out; j++) {
        n->out[j] = -1;
        if (p->output[j][0]) {
            char what[240];
            snprintf(what, sizeof what, "%s output %d", who, j);
            int rc = new_value(o, p->output[j], what, &n->out[j]);
            if (rc) return rc;
        }
    }
    return MUSA_OK;
}

static int validate(musa_onnx *o) {
    const Onnx__ModelProto *m = o->proto;
    int rc = read_opset(o);
    if (rc) return rc;
    const Onnx__GraphProto *g = m->graph;
    if (!g) return bad(o, "the model has no graph");
    if (g->n_sparse_initializer) return bad(o, "sparse initializers are not supported");
    size_t cap = g->n_initializer + g->n_input + 1;
    for (size_t i = 0; i < g->n_node; i++) cap += g->node[i]->n_output;
    if (cap > MAX_VALUES) return bad(o, "the graph has more than %d values", MAX_VALUES);
    o->names = calloc(cap, sizeof *o->names);
    o->nodes = calloc(g->n_node + 1, sizeof *o->nodes);
    o->inputs = calloc(g->n_input + 1, sizeof *o->inputs);
    o->outputs = calloc(g->n_output + 1, sizeof *o->outputs);
    if (!o->names || !o->nodes || !o->inputs || !o->outputs) return musa_err_nomem("onnx", cap);
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        char what[160];
        snprintf(what, sizeof what, "initializer '%.100s'", t->name ? t->name : "");
        int32_t id;
        int64_t numel;
        if ((rc = new_value(o, t->name, what, &id)) || (rc = check_tensor(o, t, what, &numel)))
            return rc;
    }
    for (size_t i = 0; i < g->n_input; i++) { /* inputs not given by an initializer */
        const char *name = g->input[i]->name ? g->input[i]->name : "";
        if (value_id(o, name) >= 0) continue; /* an initializer's default (IR < 4) */
        onnx_input *in = &o->inputs[o->n_inputs];
        char what[160];
        snprintf(what, sizeof what, "input '%.100s'", name);
        if ((rc = read_input(o, g->input[i], in)) || (rc = new_value(o, name, what, &in->value)))
            return rc;
        o->n_inputs++;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        o->n_nodes = (int)i + 1;
        if ((rc = read_node(o, g->node[i], &o->nodes[i]))) return rc;
        for (size_t j = 0; j < g->node[i]->n_attribute; j++) { /* strings get a NUL */
            Onnx__AttributeProto *a = g->node[i]->attribute[j];
            if (!a->has_s) continue;
            uint8_t *d = realloc(a->s.data, a->s.len + 1); /* protobuf-c's own malloc'd copy */
            if (!d) return musa_err_nomem("onnx", a->s.len + 1);
            d[a->s.len] = 0;
            a->s.data = d;
        }
    }
    /* Values read as numbers (an op's host inputs, and everything they are
     * computed from, but not through Shape and Size, which read shapes):
     * model inputs among them are built for by value. */
    bool *host = calloc((size_t)o->n_values + 1, sizeof *host);
    if (!host) return musa_err_nomem("onnx", (size_t)o->n_values);
    for (int i = o->n_nodes - 1; i >= 0; i--) {
        const onnx_node *n = &o->nodes[i];
        bool needed = false; /* some output of n is read as numbers */
        for (int j = 0; j < n->n_out; j++) needed |= n->out[j] >= 0 && host[n->out[j]];
        for (int k = 0; k < n->n_in && !n->op->meta; k++)
            if (n->in[k] >= 0 && (needed || (k < 8 && (n->op->host >> k & 1))))
                host[n->in[k]] = true;
    }
    for (int m = 0; m < o->n_inputs; m++) o->inputs[m].by_value = host[o->inputs[m].value];
    free(host);
    if (!g->n_output) return bad(o, "the graph has no outputs");
    for (size_t j = 0; j < g->n_output; j++) {
        const char *name = g->output[j]->name ? g->output[j]->name : "";
        if ((o->outputs[j] = value_id(o, name)) < 0)
            return bad(o, "graph output '%.100s' is made by no node, input or initializer", name);
        o->n_outputs++;
    }
    return MUSA_OK;
}

musa_onnx *musa_onnx_read(const void *data, size_t size, const char *path) {
    musa_onnx *o = calloc(1, sizeof *o);
    if (!o) {
        musa_err_nomem("onnx", sizeof *o);
        return NULL;
    }
    const char *shown = path ? path : "<bytes>";
    size_t len = strlen(shown) + 16;
    if (!(o->where = malloc(len))) {
        free(o);
        musa_err_nomem("onnx", len);
        return NULL;
    }
    snprintf(o->where, len, "[onnx] %s", shown);
    if (path) {
        const char *slash = strrchr(path, '/');
        o->dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    }
    int rc = MUSA_OK;
    if (path && !o->dir) rc = musa_err_nomem("onnx", 64);
    void *map = NULL; /* a file is mapped only while it is parsed: the peak is one copy */
    size_t mapped = 0;
    if (!rc && !data) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode))
            rc = bad(o, "%s", fd < 0 ? strerror(errno) : "not a regular file");
        else if (st.st_size <= 0 || (uint64_t)st.st_size > MAX_FILE)
            rc = bad(o, "%lld bytes is not the size of an ONNX model (1 byte to 2 GiB)",
                     (long long)st.st_size);
        else if ((map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) ==
                 MAP_FAILED)
            map = NULL, rc = bad(o, "cannot map the file: %s", strerror(errno));
        else
            data = map, size = mapped = (size_t)st.st_size;
        if (fd >= 0) close(fd);
    }
    if (!rc && (!size || size > MAX_FILE))
        rc = bad(o, "%zu bytes is not the size of an ONNX model (1 byte to 2 GiB)", size);
    if (!rc && !(o->proto = onnx__model_proto__unpack(NULL, size, data)))
        rc = bad(o, "not an ONNX model: the protobuf does not parse (truncated or corrupt)");
    if (map) munmap(map, mapped);
    if (!rc) rc = validate(o);
    if (!rc && !(o->consts = calloc((size_t)o->n_values + 1, sizeof *o->consts)))
        rc = musa_err_nomem("onnx", sizeof *o->consts * (size_t)o->n_values);
    Onnx__GraphProto *g = rc ? NULL : o->proto->graph;
    for (size_t i = 0; !rc && i < g->n_initializer; i++) {
        Onnx__TensorProto *p = g->initializer[i];
        char what[160];
        snprintf(what, sizeof what, "initializer '%.100s'", p->name);
        musa_tensor *t = onnx_make_tensor(o, p, what);
        if (!t) rc = musa_last_error_code();
        o->consts[value_id(o, p->name)] = t;
        /* the tensor holds the data now: the parsed copy goes (protobuf-c
         * allocates with malloc, and frees NULL fields as absent) */
        free(p->raw_data.data), free(p->float_data), free(p->int32_data), free(p->int64_data);
        free(p->double_data), free(p->uint64_data);
        p->raw_data.data = NULL, p->float_data = NULL, p->int32_data = NULL;
        p->int64_data = NULL, p->double_data = NULL, p->uint64_data = NULL;
        p->raw_data.len = p->n_float_data = p->n_int32_data = p->n_int64_data = 0;
        p->n_double_data = p->n_uint64_data = 0;
    }
    if (rc) {
        musa_onnx_free(o);
        return NULL;
    }
    return o;
}

#else /* built without protobuf-c */

const char *musa_onnx_op(int i) {
    (void)i;
    return NULL;
}

musa_onnx *musa_onnx_read(const void *data, size_t size, const char *path) {
    (void)data, (void)size;
    musa_err(MUSA_ERR_NOT_IMPLEMENTED,
             "[onnx] %s: this musa was built without protobuf-c (Debian's libprotobuf-c-dev and "
             "protobuf-c-compiler), so it cannot read ONNX files",
             path ? path : "<bytes>");
    return NULL;
}
void musa_onnx_free(musa_onnx *o) {
    (void)o;
}
int musa_onnx_num_inputs(const musa_onnx *o) {
    (void)o;
    return 0;
}
int musa_onnx_num_outputs(const musa_onnx *o) {
    (void)o;
    return 0;
}
int musa_onnx_input(const musa_onnx *o, int i, const char **name, musa_dtype *dtype, int *ndim,
                    int64_t *dims, const char **dim_params) {
    (void)o, (void)i, (void)name, (void)dtype, (void)ndim, (void)dims, (void)dim_params;
    return MUSA_ERR_NOT_IMPLEMENTED;
}
int musa_onnx_check_inputs(const musa_onnx *o, int n_in, musa_tensor *const *in) {
    (void)o, (void)n_in, (void)in;
    return MUSA_ERR_NOT_IMPLEMENTED;
}
int musa_onnx_key(const musa_onnx *o, int n_in, musa_tensor *const *in, int64_t *key, int max) {
    (void)o, (void)n_in, (void)in, (void)key, (void)max;
    return MUSA_ERR_NOT_IMPLEMENTED;
}
musa_graph *musa_onnx_capture(musa_onnx *o, int n_in, musa_tensor *const *in) {
    (void)o, (void)n_in, (void)in;
    return NULL;
}
#endif
