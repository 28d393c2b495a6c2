/* A fake libamdhip64.so.6 that lacks most of the HIP symbols the runtime
 * needs: the HIP backend must report itself unavailable, naming them. */
#define EXPORT __attribute__((visibility("default")))
EXPORT int hipInit(unsigned int flags) {
  (void)flags;
  return 0;
}
