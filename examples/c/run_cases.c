/* The conformance suite from C99: runs every case tests/conformance/export_cases.py exported
 * (one bundle, raw input and float64 expected files, a line-based manifest) on one device
 * through the runtime's C ABI, and compares each result with the suite's numpy reference.
 *
 *   run_cases DIR [DEVICE]     DIR: the exporter's output (DIR/manifest.txt, its bundle);
 *                              DEVICE: "cpu" (default), "cuda", "cuda:1", "vulkan:0", ...
 *
 * Every buffer of a case lives in device memory (tl_buffer_allocate; host memory on the CPU):
 * inputs are copied in, the case's launches run in order, checked buffers are copied out.
 * One line per case: name, the variant(s) chosen, the largest error and its ratio to the
 * tolerance (atol + rtol * |expected|; a NaN matches only an expected NaN), ok or FAIL; then a
 * summary. Exit status: 0 when every case passed, 1 when one failed, 2 for a bad command line,
 * manifest or data file (the message names the file and the manifest line). The manifest
 * format is described in tests/conformance/export_cases.py. Only tilelang/runtime.h and
 * libtilelang_runtime.so are used. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tilelang/runtime.h"

#define RC_MAX_RANK 8

typedef struct rc_dtype_t {
  const char* name; /* Tile IR name */
  uint8_t code, bits;
} rc_dtype_t;

static const rc_dtype_t rc_dtypes[] = {
    {"f16", TL_DTYPE_FLOAT, 16}, {"bf16", TL_DTYPE_BFLOAT, 16}, {"f32", TL_DTYPE_FLOAT, 32},
    {"f64", TL_DTYPE_FLOAT, 64}, {"i8", TL_DTYPE_INT, 8},       {"i16", TL_DTYPE_INT, 16},
    {"i32", TL_DTYPE_INT, 32},   {"i64", TL_DTYPE_INT, 64},     {"u8", TL_DTYPE_UINT, 8},
    {"u16", TL_DTYPE_UINT, 16},  {"u32", TL_DTYPE_UINT, 32},    {"u64", TL_DTYPE_UINT, 64},
    {"bool", TL_DTYPE_BOOL, 8}};

typedef struct rc_buffer_t {
  const rc_dtype_t* dtype;
  size_t count;
  char* file;
  int line;
} rc_buffer_t;

typedef struct rc_arg_t {
  int buffer; /* tensors: buffer id; scalars: -1 */
  const rc_dtype_t* dtype;
  int32_t rank;
  int64_t shape[RC_MAX_RANK];
  tl_arg_t scalar;
} rc_arg_t;

typedef struct rc_launch_t {
  char* kernel;
  size_t arg_count;
  rc_arg_t* args;
  int line;
} rc_launch_t;

typedef struct rc_check_t {
  int buffer;
  const rc_dtype_t* dtype;
  size_t count;
  char* file;
  double rtol, atol;
  int signed_zeros; /* a zero's sign must match too */
  int line;
} rc_check_t;

typedef struct rc_case_t {
  char* name;
  int line;
  size_t buffer_count, launch_count, check_count;
  rc_buffer_t* buffers;
  rc_launch_t* launches;
  rc_check_t* checks;
} rc_case_t;

typedef struct rc_manifest_t {
  char* dir;
  char* path;
  char* bundle;
  size_t case_count, uncovered_count;
  rc_case_t* cases;
  char** uncovered; /* "NAME REASON" */
} rc_manifest_t;

/* ---- parsing ---------------------------------------------------------------------------- */

static char* rc_strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* p = (char*)malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

static void* rc_grow(void* array, size_t count, size_t size) {
  void* p = realloc(array, (count + 1) * size);
  if (p == NULL) {
    fprintf(stderr, "run_cases: out of memory\n");
    exit(2);
  }
  return p;
}

/* A manifest error: names the file and line, exits with status 2. */
static void rc_bad(const rc_manifest_t* m, int line, const char* format, ...) {
  va_list ap;
  fprintf(stderr, "%s:%d: ", m->path, line);
  va_start(ap, format);
  vfprintf(stderr, format, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(2);
}

static const rc_dtype_t* rc_find_dtype(const char* name) {
  size_t i;
  for (i = 0; i < sizeof(rc_dtypes) / sizeof(rc_dtypes[0]); ++i)
    if (strcmp(rc_dtypes[i].name, name) == 0) return &rc_dtypes[i];
  return NULL;
}

static size_t rc_elem_size(const rc_dtype_t* d) { return d->bits / 8u; }

static int rc_parse_size(const char* s, size_t* out) {
  char* end;
  unsigned long long v;
  if (*s < '0' || *s > '9') return 0;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || *end) return 0;
  *out = (size_t)v;
  return 1;
}

static int rc_parse_double(const char* s, double* out) {
  char* end;
  if (*s == 0) return 0;
  *out = strtod(s, &end);
  return *end == 0;
}

static char* rc_join(const char* dir, const char* file) {
  char* p = (char*)malloc(strlen(dir) + strlen(file) + 2);
  if (p == NULL) exit(2);
  sprintf(p, "%s/%s", dir, file);
  return p;
}

/* Checks that DIR/file exists and holds exactly `bytes` bytes. */
static void rc_check_file(const rc_manifest_t* m, int line, const char* file, size_t bytes) {
  char* path = rc_join(m->dir, file);
  FILE* f = fopen(path, "rb");
  long size = -1;
  if (f == NULL) rc_bad(m, line, "cannot open data file %s: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) rc_bad(m, line, "cannot read data file %s", path);
  fclose(f);
  if ((size_t)size != bytes)
    rc_bad(m, line, "data file %s holds %ld bytes, expected %zu", path, size, bytes);
  free(path);
}

/* One launch argument: tID:DTYPE:D0xD1... or s:DTYPE:VALUE. */
static void rc_parse_arg(const rc_manifest_t* m, int line, const rc_case_t* c, char* tok, rc_arg_t* arg) {
  char* colon1 = strchr(tok, ':');
  char* colon2 = colon1 ? strchr(colon1 + 1, ':') : NULL;
  memset(arg, 0, sizeof(*arg));
  if (colon1 == NULL || colon2 == NULL)
    rc_bad(m, line, "argument '%s': expected tID:DTYPE:SHAPE or s:DTYPE:VALUE", tok);
  *colon1 = 0;
  *colon2 = 0;
  if ((arg->dtype = rc_find_dtype(colon1 + 1)) == NULL) rc_bad(m, line, "unknown dtype '%s'", colon1 + 1);
  if (tok[0] == 't') {
    size_t id;
    char* dim = colon2 + 1;
    if (!rc_parse_size(tok + 1, &id) || id >= c->buffer_count)
      rc_bad(m, line, "tensor argument names buffer '%s'; the case has %zu buffer(s) declared before it", tok + 1,
             c->buffer_count);
    arg->buffer = (int)id;
    while (1) {
      char* x = strchr(dim, 'x');
      size_t extent;
      if (x) *x = 0;
      if (arg->rank == RC_MAX_RANK) rc_bad(m, line, "tensor of more than %d dimensions", RC_MAX_RANK);
      if (!rc_parse_size(dim, &extent)) rc_bad(m, line, "bad dimension '%s' in a tensor shape", dim);
      arg->shape[arg->rank++] = (int64_t)extent;
      if (x == NULL) break;
      dim = x + 1;
    }
  } else if (strcmp(tok, "s") == 0) {
    const rc_dtype_t* d = arg->dtype;
    tl_dtype_t dt = tl_dtype(d->code, d->bits);
    const char* text = colon2 + 1;
    arg->buffer = -1;
    if (d->code == TL_DTYPE_FLOAT && (d->bits == 32 || d->bits == 64)) {
      double v;
      if (!rc_parse_double(text, &v)) rc_bad(m, line, "bad %s scalar '%s'", d->name, text);
      arg->scalar = d->bits == 32 ? tl_arg_f32((float)v) : tl_arg_f64(v);
    } else if (d->code == TL_DTYPE_INT || d->code == TL_DTYPE_UINT || d->code == TL_DTYPE_BOOL) {
      char* end;
      long long v;
      errno = 0;
      v = strtoll(text, &end, 10);
      if (errno || *end || *text == 0) rc_bad(m, line, "bad %s scalar '%s'", d->name, text);
      arg->scalar = tl_arg_scalar_bits(dt, d->bits / 8u, 0);
      switch (d->bits) { /* little-endian: the value at the start of `value` */
        case 8: arg->scalar.value.bytes[0] = (uint8_t)v; break;
        case 16: { int16_t s16 = (int16_t)v; memcpy(arg->scalar.value.bytes, &s16, 2); break; }
        case 32: arg->scalar.value.i32 = (int32_t)v; break;
        default: arg->scalar.value.i64 = (int64_t)v; break;
      }
    } else {
      rc_bad(m, line, "scalar of dtype %s is not supported", d->name);
    }
  } else {
    rc_bad(m, line, "argument '%s': expected tID:DTYPE:SHAPE or s:DTYPE:VALUE", tok);
  }
}

#define RC_MAX_TOKENS 64

static void rc_parse(rc_manifest_t* m) {
  FILE* f = fopen(m->path, "r");
  char text[8192];
  int line = 0, header = 0;
  rc_case_t* c = NULL; /* the open case */
  if (f == NULL) {
    fprintf(stderr, "run_cases: cannot open %s: %s\n", m->path, strerror(errno));
    exit(2);
  }
  while (fgets(text, sizeof(text), f)) {
    char* tok[RC_MAX_TOKENS];
    size_t n = 0, len = strlen(text);
    char* p;
    ++line;
    if (len && text[len - 1] != '\n' && !feof(f)) rc_bad(m, line, "line longer than %zu bytes", sizeof(text) - 2);
    if (text[0] == '#') continue;
    if (strncmp(text, "uncovered ", 10) == 0) { /* NAME REASON...: kept whole */
      if (c) rc_bad(m, line, "'uncovered' inside case '%s' (no 'end' since line %d)", c->name, c->line);
      text[strcspn(text, "\n")] = 0;
      m->uncovered = (char**)rc_grow(m->uncovered, m->uncovered_count, sizeof(char*));
      m->uncovered[m->uncovered_count++] = rc_strdup(text + 10);
      continue;
    }
    for (p = strtok(text, " \t\r\n"); p; p = strtok(NULL, " \t\r\n")) {
      if (n == RC_MAX_TOKENS) rc_bad(m, line, "more than %d fields", RC_MAX_TOKENS);
      tok[n++] = p;
    }
    if (n == 0) continue;
    if (!header) {
      if (strcmp(tok[0], "tlcases") != 0 || n < 2 || strcmp(tok[1], "1") != 0)
        rc_bad(m, line, "expected the header 'tlcases 1 TARGET SEED', found '%s'", tok[0]);
      header = 1;
    } else if (strcmp(tok[0], "bundle") == 0) {
      if (n != 2) rc_bad(m, line, "expected 'bundle FILE', found %zu field(s)", n);
      free(m->bundle);
      m->bundle = rc_join(m->dir, tok[1]);
    } else if (strcmp(tok[0], "case") == 0) {
      if (n != 2) rc_bad(m, line, "expected 'case NAME', found %zu field(s)", n);
      if (c) rc_bad(m, line, "case '%s' starts before case '%s' (line %d) ends", tok[1], c->name, c->line);
      m->cases = (rc_case_t*)rc_grow(m->cases, m->case_count, sizeof(rc_case_t));
      c = &m->cases[m->case_count++];
      memset(c, 0, sizeof(*c));
      c->name = rc_strdup(tok[1]);
      c->line = line;
    } else if (strcmp(tok[0], "end") == 0) {
      if (!c) rc_bad(m, line, "'end' outside a case");
      if (c->launch_count == 0) rc_bad(m, line, "case '%s' has no launch", c->name);
      if (c->check_count == 0) rc_bad(m, line, "case '%s' has no check", c->name);
      c = NULL;
    } else if (!c) {
      rc_bad(m, line, "'%s' outside a case (expected tlcases, bundle, case, uncovered)", tok[0]);
    } else if (strcmp(tok[0], "buffer") == 0) {
      rc_buffer_t* b;
      size_t id;
      if (n != 5) rc_bad(m, line, "expected 'buffer ID DTYPE COUNT FILE', found %zu field(s)", n);
      if (!rc_parse_size(tok[1], &id) || id != c->buffer_count)
        rc_bad(m, line, "buffer id '%s', expected %zu (ids count up from 0)", tok[1], c->buffer_count);
      c->buffers = (rc_buffer_t*)rc_grow(c->buffers, c->buffer_count, sizeof(rc_buffer_t));
      b = &c->buffers[c->buffer_count];
      if ((b->dtype = rc_find_dtype(tok[2])) == NULL) rc_bad(m, line, "unknown dtype '%s'", tok[2]);
      if (!rc_parse_size(tok[3], &b->count)) rc_bad(m, line, "bad element count '%s'", tok[3]);
      b->file = rc_strdup(tok[4]);
      b->line = line;
      rc_check_file(m, line, b->file, b->count * rc_elem_size(b->dtype));
      ++c->buffer_count;
    } else if (strcmp(tok[0], "launch") == 0) {
      rc_launch_t* l;
      size_t i;
      if (n < 2) rc_bad(m, line, "expected 'launch KERNEL ARG...'");
      c->launches = (rc_launch_t*)rc_grow(c->launches, c->launch_count, sizeof(rc_launch_t));
      l = &c->launches[c->launch_count];
      l->kernel = rc_strdup(tok[1]);
      l->line = line;
      l->arg_count = n - 2;
      l->args = (rc_arg_t*)calloc(n, sizeof(rc_arg_t));
      if (l->args == NULL) exit(2);
      for (i = 2; i < n; ++i) {
        rc_arg_t* a = &l->args[i - 2];
        rc_parse_arg(m, line, c, tok[i], a);
        if (a->buffer >= 0) {
          size_t elems = 1, need;
          int d;
          const rc_buffer_t* b = &c->buffers[a->buffer];
          for (d = 0; d < a->rank; ++d) elems *= (size_t)a->shape[d];
          need = elems * rc_elem_size(a->dtype);
          if (need > b->count * rc_elem_size(b->dtype))
            rc_bad(m, line, "argument %zu: a tensor of %zu bytes over buffer %d of %zu bytes", i - 2, need,
                   a->buffer, b->count * rc_elem_size(b->dtype));
        }
      }
      ++c->launch_count;
    } else if (strcmp(tok[0], "check") == 0) {
      rc_check_t* k;
      size_t id;
      if (n != 7 && !(n == 8 && strcmp(tok[7], "signed_zeros") == 0))
        rc_bad(m, line, "expected 'check ID DTYPE COUNT FILE RTOL ATOL [signed_zeros]', found %zu field(s)%s%s", n,
               n == 8 ? " ending with " : "", n == 8 ? tok[7] : "");
      c->checks = (rc_check_t*)rc_grow(c->checks, c->check_count, sizeof(rc_check_t));
      k = &c->checks[c->check_count];
      if (!rc_parse_size(tok[1], &id) || id >= c->buffer_count)
        rc_bad(m, line, "check names buffer '%s'; the case has %zu buffer(s)", tok[1], c->buffer_count);
      k->buffer = (int)id;
      if ((k->dtype = rc_find_dtype(tok[2])) == NULL) rc_bad(m, line, "unknown dtype '%s'", tok[2]);
      if (!rc_parse_size(tok[3], &k->count)) rc_bad(m, line, "bad element count '%s'", tok[3]);
      if (k->count * rc_elem_size(k->dtype) > c->buffers[id].count * rc_elem_size(c->buffers[id].dtype))
        rc_bad(m, line, "check of %zu %s elements exceeds buffer %zu", k->count, k->dtype->name, id);
      k->file = rc_strdup(tok[4]);
      if (!rc_parse_double(tok[5], &k->rtol) || !rc_parse_double(tok[6], &k->atol) || k->rtol < 0 || k->atol < 0)
        rc_bad(m, line, "bad tolerances '%s' '%s' (expected RTOL ATOL >= 0)", tok[5], tok[6]);
      k->signed_zeros = n == 8;
      k->line = line;
      rc_check_file(m, line, k->file, k->count * sizeof(double));
      ++c->check_count;
    } else {
      rc_bad(m, line, "unknown record '%s' (expected buffer, launch, check, end)", tok[0]);
    }
  }
  fclose(f);
  if (!header) rc_bad(m, line + 1, "empty manifest (expected the header 'tlcases 1 TARGET SEED')");
  if (c) rc_bad(m, line + 1, "case '%s' (line %d) has no 'end'", c->name, c->line);
  if (m->bundle == NULL) rc_bad(m, line + 1, "no 'bundle FILE' record");
}

/* ---- running -------------------------------------------------------------------------- */

static int rc_read(const char* dir, const char* file, void* data, size_t bytes) {
  char* path = rc_join(dir, file);
  FILE* f = fopen(path, "rb");
  size_t got = f ? fread(data, 1, bytes, f) : 0;
  if (f) fclose(f);
  if (got != bytes) fprintf(stderr, "run_cases: cannot read %zu bytes from %s\n", bytes, path);
  free(path);
  return got == bytes;
}

static double rc_half(uint16_t h) {
  int exp = (h >> 10) & 0x1F;
  double mant = (double)(h & 0x3FF);
  double v;
  if (exp == 0) v = ldexp(mant, -24);
  else if (exp == 31) v = mant != 0 ? NAN : INFINITY;
  else v = ldexp(mant + 1024.0, exp - 25);
  return (h & 0x8000) ? -v : v;
}

/* Element i of `data` (dtype d) as a double. */
static double rc_value(const rc_dtype_t* d, const unsigned char* data, size_t i) {
  const unsigned char* p = data + i * rc_elem_size(d);
  union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; int8_t i8; int16_t i16; int32_t i32; int64_t i64;
          float f32; double f64; } u;
  memcpy(&u, p, rc_elem_size(d));
  switch (d->code) {
    case TL_DTYPE_FLOAT:
      return d->bits == 16 ? rc_half(u.u16) : d->bits == 32 ? (double)u.f32 : u.f64;
    case TL_DTYPE_BFLOAT: {
      uint32_t bits = (uint32_t)u.u16 << 16;
      float f;
      memcpy(&f, &bits, 4);
      return (double)f;
    }
    case TL_DTYPE_INT:
      return d->bits == 8 ? u.i8 : d->bits == 16 ? u.i16 : d->bits == 32 ? u.i32 : (double)u.i64;
    default:
      return d->bits == 8 ? u.u8 : d->bits == 16 ? u.u16 : d->bits == 32 ? u.u32 : (double)u.u64;
  }
}

/* Prints a failed status into `why`, frees it; returns 1 on failure. */
static int rc_failed(tl_status_t status, const char* what, char* why, size_t size) {
  if (status == NULL) return 0;
  snprintf(why, size, "%s: %s: %s", what, tl_status_code_name(tl_status_code(status)), tl_status_message(status));
  tl_status_free(status);
  return 1;
}

/* Runs one case; 1 when it passed. Prints its line. */
static int rc_run_case(const rc_manifest_t* m, const rc_case_t* c, tl_bundle_t* bundle, tl_device_t* device) {
  tl_buffer_t** buffers = (tl_buffer_t**)calloc(c->buffer_count + 1, sizeof(tl_buffer_t*));
  char variants[512] = "";
  char why[4096] = "";
  double worst_abs = 0.0, worst_ratio = 0.0;
  size_t i, j;
  int ok = 0;
  if (buffers == NULL) exit(2);
  for (i = 0; i < c->buffer_count; ++i) {
    const rc_buffer_t* b = &c->buffers[i];
    size_t bytes = b->count * rc_elem_size(b->dtype);
    void* host = malloc(bytes ? bytes : 1);
    int read_ok;
    if (host == NULL) exit(2);
    read_ok = rc_read(m->dir, b->file, host, bytes);
    if (!read_ok) snprintf(why, sizeof(why), "%s:%d: cannot read %s", m->path, b->line, b->file);
    else if (!rc_failed(tl_buffer_allocate(device, bytes ? bytes : 1, &buffers[i]), "tl_buffer_allocate", why,
                        sizeof(why)) &&
             bytes)
      rc_failed(tl_buffer_copy_from_host(buffers[i], 0, host, bytes, NULL), "copy in", why, sizeof(why));
    free(host);
    if (why[0]) goto done;
  }
  for (i = 0; i < c->launch_count; ++i) {
    const rc_launch_t* l = &c->launches[i];
    tl_kernel_t* kernel = NULL;
    tl_prepared_t* prepared = NULL;
    tl_variant_info_t info;
    tl_arg_t* args = (tl_arg_t*)calloc(l->arg_count + 1, sizeof(tl_arg_t));
    char what[300];
    int failed;
    if (args == NULL) exit(2);
    snprintf(what, sizeof(what), "%s:%d: %s", m->path, l->line, l->kernel);
    failed = rc_failed(tl_bundle_find_kernel(bundle, l->kernel, &kernel), what, why, sizeof(why)) ||
             rc_failed(tl_kernel_prepare(kernel, device, 0, &prepared), what, why, sizeof(why));
    if (!failed) {
      memset(&info, 0, sizeof(info));
      info.struct_size = sizeof(info);
      if (tl_prepared_variant_info(prepared, &info) == NULL) {
        char id[160];
        snprintf(id, sizeof(id), "%s%s", info.id, info.jit ? "(jit)" : "");
        if (strstr(variants, id) == NULL && strlen(variants) + strlen(id) + 2 < sizeof(variants)) {
          if (variants[0]) strcat(variants, ",");
          strcat(variants, id);
        }
      }
      for (j = 0; j < l->arg_count; ++j) {
        const rc_arg_t* a = &l->args[j];
        if (a->buffer < 0) {
          args[j] = a->scalar;
        } else {
          args[j] = tl_arg_tensor(tl_buffer_device_pointer(buffers[a->buffer]), tl_dtype(a->dtype->code, a->dtype->bits),
                                  a->rank, a->shape, NULL);
        }
      }
      failed = rc_failed(tl_launch(prepared, NULL, l->arg_count, args, NULL), what, why, sizeof(why));
    }
    free(args);
    tl_prepared_release(prepared);
    tl_kernel_release(kernel);
    if (failed) goto done;
  }
  ok = 1;
  for (i = 0; i < c->check_count && ok; ++i) {
    const rc_check_t* k = &c->checks[i];
    size_t bytes = k->count * rc_elem_size(k->dtype);
    unsigned char* actual = (unsigned char*)malloc(bytes ? bytes : 1);
    double* want = (double*)malloc(k->count ? k->count * sizeof(double) : 1);
    if (actual == NULL || want == NULL) exit(2);
    if (!rc_read(m->dir, k->file, want, k->count * sizeof(double))) {
      snprintf(why, sizeof(why), "%s:%d: cannot read %s", m->path, k->line, k->file);
      ok = 0;
    } else if (bytes && rc_failed(tl_buffer_copy_to_host(buffers[k->buffer], 0, actual, bytes, NULL), "copy out", why,
                                  sizeof(why))) {
      ok = 0;
    }
    for (j = 0; ok && j < k->count; ++j) {
      double a = rc_value(k->dtype, actual, j), e = want[j];
      double err = fabs(a - e), tol = k->atol + k->rtol * fabs(e), ratio;
      int bad;
      if (isnan(e) || isnan(a)) {
        bad = !(isnan(e) && isnan(a)); /* NaN only where the reference has one */
        err = ratio = bad ? INFINITY : 0.0;
      } else if (isinf(e) || isinf(a)) {
        bad = a != e;
        err = ratio = bad ? INFINITY : 0.0;
      } else {
        ratio = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0);
        bad = err > tol;
        if (!bad && k->signed_zeros && a == 0.0 && e == 0.0 && !signbit(a) != !signbit(e)) {
          bad = 1;
          err = ratio = INFINITY; /* -0 for +0 */
        }
      }
      if (err > worst_abs) worst_abs = err;
      if (ratio > worst_ratio) worst_ratio = ratio;
      if (bad) {
        snprintf(why, sizeof(why), "check %zu (buffer %d against %s, %s:%d): element %zu is %.9g, expected %.9g "
                 "(|error| %.3g > %.3g = atol %g + rtol %g * |expected|)", i, k->buffer, k->file, m->path, k->line, j,
                 a, e, err, tol, k->atol, k->rtol);
        ok = 0;
      }
    }
    free(actual);
    free(want);
  }
done:
  for (i = 0; i < c->buffer_count; ++i) tl_buffer_release(buffers[i]);
  free(buffers);
  printf("%-4s %s  variant %s  max|err| %.3g  err/tol %.3g\n", ok ? "ok" : "FAIL", c->name,
         variants[0] ? variants : "-", worst_abs, worst_ratio);
  if (!ok) printf("     %s\n", why);
  fflush(stdout);
  return ok;
}

int main(int argc, char** argv) {
  rc_manifest_t m;
  const char* device_spec = argc > 2 ? argv[2] : "cpu";
  tl_runtime_options_t options;
  tl_runtime_t* runtime = NULL;
  tl_device_t* device = NULL;
  tl_bundle_t* bundle = NULL;
  tl_device_info_t info;
  tl_status_t st;
  size_t i, passed = 0;
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: %s DIR [DEVICE]   (DIR from tests/conformance/export_cases.py; DEVICE: cpu, cuda, "
            "vulkan:0, ...)\n", argv[0]);
    return 2;
  }
  memset(&m, 0, sizeof(m));
  m.dir = argv[1];
  m.path = rc_join(m.dir, "manifest.txt");
  rc_parse(&m);

  tl_runtime_options_init(&options);
  st = tl_runtime_create(&options, &runtime);
  if (st == NULL) st = tl_runtime_default_device(runtime, device_spec, &device);
  if (st == NULL) st = tl_bundle_open_file(runtime, m.bundle, &bundle);
  if (st != NULL) {
    fprintf(stderr, "run_cases: %s: %s\n", tl_status_code_name(tl_status_code(st)), tl_status_message(st));
    tl_status_free(st);
    tl_runtime_release(runtime);
    return 2;
  }
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (tl_device_info(device, &info) == NULL)
    printf("device %s: '%s' arch %s; bundle %s: %zu kernel(s); %zu case(s)\n", device_spec, info.name, info.arch,
           m.bundle, tl_bundle_kernel_count(bundle), m.case_count);
  for (i = 0; i < m.case_count; ++i) passed += (size_t)rc_run_case(&m, &m.cases[i], bundle, device);
  for (i = 0; i < m.uncovered_count; ++i) printf("not covered: %s\n", m.uncovered[i]);
  printf("%zu passed, %zu failed, %zu not covered (exporter's reasons above)\n", passed, m.case_count - passed,
         m.uncovered_count);
  tl_bundle_release(bundle);
  tl_device_release(device);
  tl_runtime_release(runtime);
  return passed == m.case_count && m.case_count > 0 ? 0 : 1;
}
