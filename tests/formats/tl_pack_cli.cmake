# tl_pack.*: tl-pack run on generated bundles through ctest, checking exit
# codes and output fragments. The corpus (negative cases and valid samples)
# is written by tl_formats_corpus_gen in a ctest fixture.

set(TL_PACK_CORPUS ${CMAKE_CURRENT_BINARY_DIR}/cli_corpus)
set(TL_PACK_OUT ${CMAKE_CURRENT_BINARY_DIR}/cli_out)
set(CLI_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/cli_check.sh)

add_test(NAME tl_pack.corpus_generate
  COMMAND ${CMAKE_COMMAND} -E env sh -c "rm -rf '${TL_PACK_CORPUS}' '${TL_PACK_OUT}' && mkdir -p '${TL_PACK_OUT}' && '$<TARGET_FILE:tl_formats_corpus_gen>' '${TL_PACK_CORPUS}'")
set_tests_properties(tl_pack.corpus_generate PROPERTIES FIXTURES_SETUP tl_pack_corpus)

# tl_pack_cli_test(NAME EXIT REGEX ARGS...): `tl-pack ARGS` must exit EXIT and print REGEX.
function(tl_pack_cli_test name exit_code regex)
  add_test(NAME tl_pack.${name} COMMAND sh ${CLI_CHECK} ${exit_code} ${regex} $<TARGET_FILE:tl-pack> ${ARGN})
  set_tests_properties(tl_pack.${name} PROPERTIES FIXTURES_REQUIRED tl_pack_corpus)
endfunction()
# tl_pack_sh_test(NAME SCRIPT): a multi-step check as a shell script ($TLP = tl-pack,
# $C = corpus dir, $O = output dir, $CHECK = cli_check.sh).
function(tl_pack_sh_test name script)
  add_test(NAME tl_pack.${name}
    COMMAND ${CMAKE_COMMAND} -E env TLP=$<TARGET_FILE:tl-pack> C=${TL_PACK_CORPUS} O=${TL_PACK_OUT} CHECK=${CLI_CHECK}
            sh -c "set -e; ${script}")
  set_tests_properties(tl_pack.${name} PROPERTIES FIXTURES_REQUIRED tl_pack_corpus)
endfunction()

set(C ${TL_PACK_CORPUS})
set(O ${TL_PACK_OUT})

# Registry and usage.
tl_pack_cli_test(help 0 "inspect +show kernels.*\nverify.*\nmerge.*\nextract.*\nstrip" help)
tl_pack_cli_test(no_args 1 "usage: tl-pack <verb>")
tl_pack_cli_test(unknown_verb 1 "unknown verb 'frobnicate'" frobnicate)
tl_pack_cli_test(verb_help 0 "usage: tl-pack verify" help verify)
tl_pack_cli_test(unknown_option 1 "unknown option --bogus" inspect --bogus ${C}/valid_main.tlb)
tl_pack_cli_test(missing_file 2 "NOT_FOUND: ${C}/absent.tlb: cannot open" verify ${C}/absent.tlb)

# inspect.
tl_pack_cli_test(inspect_table 0
  "gemm\\(A: f16\\[M%16,K%16\\] read align16, B: f16\\[K%16,N%16\\] read align16, C: f32\\[M%16,N%16\\] write align16\\)"
  inspect ${C}/valid_main.tlb)
tl_pack_cli_test(inspect_variants 0 "cuda.sm_90a +cuda +cubin +sm_90a +10 +#1 +1500 +1500"
  inspect ${C}/valid_main.tlb)
tl_pack_cli_test(inspect_payloads 0 "payloads \\(4\\)" inspect ${C}/valid_main.tlb)
tl_pack_cli_test(inspect_json 0 "^\\{\"path\":.*\"kernels\":\\[\\{\"name\":\"gemm\".*\"id\":\"cpu.x86-64-v3\",\"backend\":\"cpu\""
  inspect --json ${C}/valid_main.tlb)
tl_pack_sh_test(inspect_json_parses
  "\"$TLP\" inspect --json \"$C/valid_main.tlb\" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert [k[\"name\"] for k in d[\"kernels\"]]==[\"gemm\",\"softmax\"], d; assert len(d[\"payloads\"])==4; assert d[\"format\"]=={\"major\":1,\"minor\":0}'")
tl_pack_cli_test(inspect_rejects_bad 4 "DATA_LOSS: .*bad_header_crc.tlb: header CRC32C mismatch"
  inspect ${C}/bad_header_crc.tlb)

# verify: valid bundles, then one case per failure class (exit codes 3..6).
tl_pack_cli_test(verify_ok 0 "valid_main.tlb: OK \\(format 1.0, 2 kernels, 5 variants, 4 payloads"
  verify ${C}/valid_main.tlb ${C}/valid_other.tlb ${C}/valid_minimal.tlb ${C}/valid_uncompressed.tlb)
foreach(case_spec
    "bad_magic 3 bad signature"
    "crlf_mangled 3 LF -> CRLF"
    "truncated_header_17 4 truncated bundle"
    "truncated_payload 4 truncated bundle"
    "newer_major 5 bundle format 2.0"
    "unknown_must_understand 5 tensor.v9"
    "manifest_overlaps_payload 3 overlaps the payload region"
    "payload_offset_overflow 3 overflows u64"
    "bad_manifest_crc 4 manifest CRC32C mismatch"
    "bad_stored_crc 4 stored CRC32C mismatch"
    "bad_raw_crc 4 raw CRC32C mismatch"
    "zstd_size_mismatch 3 zstd frame content size 3000 differs"
    "zstd_bomb 6 exceeds the limit of 1073741824"
    "payload_index_out_of_range 3 payload index 99 out of range"
    "duplicate_kernel_names 3 duplicate kernel name 'gemm'")
  string(REPLACE " " ";" parts "${case_spec}")
  list(GET parts 0 case_name)
  list(GET parts 1 case_exit)
  list(SUBLIST parts 2 -1 fragment_words)
  string(REPLACE ";" " " fragment "${fragment_words}")
  tl_pack_cli_test(verify_${case_name} ${case_exit} "${case_name}.tlb: FAILED: .*${fragment}" verify ${C}/${case_name}.tlb)
endforeach()
tl_pack_cli_test(verify_lower_limit 6 "raw_size 3000 exceeds the limit of 1024 bytes"
  verify --max-payload-bytes 1K ${C}/valid_main.tlb)
tl_pack_cli_test(verify_first_failure_wins 4 "valid_main.tlb: OK.*\n.*bad_stored_crc.tlb: FAILED"
  verify ${C}/valid_main.tlb ${C}/bad_stored_crc.tlb ${C}/newer_major.tlb)
# Every case of the corpus, with the exit code the corpus index records.
tl_pack_sh_test(verify_whole_corpus
  "n=0; while read name code exit fragment; do n=$((n+1)); rc=0; \"$TLP\" verify --quiet \"$C/$name.tlb\" > \"$O/$name.out\" 2>&1 || rc=$?; [ $rc -eq $exit ] || { echo \"$name: exit $rc, expected $exit\"; cat \"$O/$name.out\"; exit 1; }; grep -qF -- \"$fragment\" \"$O/$name.out\" || { echo \"$name: lacks '$fragment'\"; cat \"$O/$name.out\"; exit 1; }; done < \"$C/corpus.txt\"; echo \"$n cases\"; [ $n -gt 90 ]")

# extract.
tl_pack_sh_test(extract_variant
  "\"$CHECK\" 0 'kernel .gemm. variant .cpu.x86-64-v3. \\(payload 0\\), 3000 bytes' \"$TLP\" extract \"$C/valid_main.tlb\" --kernel gemm --variant cpu.x86-64-v3 -o \"$O/gemm_cpu.bin\"; cmp \"$O/gemm_cpu.bin\" \"$C/gemm_cpu.bin\"")
tl_pack_cli_test(extract_by_index 0 "payload 1, 1500 bytes" extract ${C}/valid_main.tlb --payload 1 -o ${O}/p1.bin)
tl_pack_cli_test(extract_unknown_kernel 8 "no kernel 'nope' \\(kernels: gemm, softmax\\)"
  extract ${C}/valid_main.tlb --kernel nope --variant x -o ${O}/x.bin)
tl_pack_cli_test(extract_unknown_variant 8 "kernel 'gemm' has no variant 'cuda.sm_100' \\(variants: cpu.x86-64-v3, cuda.sm_90a\\)"
  extract ${C}/valid_main.tlb --kernel gemm --variant cuda.sm_100 -o ${O}/x.bin)
tl_pack_cli_test(extract_payload_out_of_range 8 "payload 9 out of range \\(bundle has 4 payloads\\)"
  extract ${C}/valid_main.tlb --payload 9 -o ${O}/x.bin)
tl_pack_cli_test(extract_corrupt_payload 4 "stored CRC32C mismatch"
  extract ${C}/bad_stored_crc.tlb --kernel gemm --variant cpu.x86-64-v3 -o ${O}/x.bin)
tl_pack_cli_test(extract_needs_selector 1 "give either --kernel and --variant, or --payload"
  extract ${C}/valid_main.tlb -o ${O}/x.bin)

# merge.
tl_pack_sh_test(merge_combines
  "\"$CHECK\" 0 '3 kernels from 2 bundles' \"$TLP\" merge -o \"$O/merged.tlb\" \"$C/valid_main.tlb\" \"$C/valid_other.tlb\"; \"$CHECK\" 0 'OK \\(format 1.0, 3 kernels, 8 variants, 6 payloads' \"$TLP\" verify \"$O/merged.tlb\"; \"$CHECK\" 0 'rmsnorm\\(x: f32' \"$TLP\" inspect \"$O/merged.tlb\"")
tl_pack_sh_test(merge_is_deterministic_and_idempotent
  "\"$TLP\" merge -o \"$O/m1.tlb\" \"$C/valid_main.tlb\" \"$C/valid_other.tlb\"; \"$TLP\" merge -o \"$O/m2.tlb\" \"$C/valid_other.tlb\" \"$C/valid_main.tlb\" \"$C/valid_main.tlb\"; cmp \"$O/m1.tlb\" \"$O/m2.tlb\"")
tl_pack_sh_test(merge_conflict
  "\"$CHECK\" 7 \"1 conflict, nothing written:.*\n.*kernel 'gemm': .*valid_main.tlb and .*valid_conflict.tlb disagree \\(signatures differ\\)\" \"$TLP\" merge -o \"$O/conflict.tlb\" \"$C/valid_main.tlb\" \"$C/valid_conflict.tlb\"; test ! -e \"$O/conflict.tlb\"")
tl_pack_cli_test(merge_rejects_corrupt_input 4 "bad_raw_crc.tlb: kernel 'softmax' variant 'cuda.sm_80': payload 2: raw CRC32C mismatch"
  merge -o ${O}/bad.tlb ${C}/valid_other.tlb ${C}/bad_raw_crc.tlb)
tl_pack_cli_test(merge_needs_output 1 "missing -o OUT" merge ${C}/valid_main.tlb ${C}/valid_other.tlb)

# strip.
tl_pack_sh_test(strip_backend
  "\"$CHECK\" 0 'kernel .softmax. dropped: no variants left' \"$TLP\" strip \"$C/valid_main.tlb\" -o \"$O/cpu_only.tlb\" --drop-backend cuda --drop-arch x86-64-v2; \"$CHECK\" 0 'OK \\(format 1.0, 1 kernels, 1 variants, 1 payloads' \"$TLP\" verify \"$O/cpu_only.tlb\"; ! \"$TLP\" inspect \"$O/cpu_only.tlb\" | grep -q cuda")
tl_pack_sh_test(strip_variant
  "\"$CHECK\" 0 'dropped 1 variants, 2 kernels kept' \"$TLP\" strip \"$C/valid_main.tlb\" -o \"$O/no_sm80.tlb\" --drop-variant softmax/cuda.sm_80; \"$CHECK\" 0 'OK \\(format 1.0, 2 kernels, 4 variants, 3 payloads' \"$TLP\" verify \"$O/no_sm80.tlb\"")
tl_pack_cli_test(strip_needs_filter 1 "nothing to drop" strip ${C}/valid_main.tlb -o ${O}/x.tlb)
tl_pack_cli_test(strip_unknown_backend 1 "unknown backend 'metal'" strip ${C}/valid_main.tlb -o ${O}/x.tlb --drop-backend metal)
