# cmake -DIN=<file> -DOUT=<file.cc> -DNAME=<symbol> -P embed.cmake
# Writes a C++ source defining `extern const unsigned char NAME[]` and
# `extern const size_t NAME_size` with the bytes of IN, so that the test
# binary carries its kernels and runs from any directory (the device machine
# gets the build tree at another path).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" hex_len)
math(EXPR size "${hex_len} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN} by embed.cmake; do not edit.\n#include <cstddef>\n"
  "extern const unsigned char ${NAME}[] = {\n${bytes}0x00};\n"
  "extern const size_t ${NAME}_size = ${size};\n")
