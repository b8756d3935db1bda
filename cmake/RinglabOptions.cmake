# Compile options for ringlab's own targets (never for third-party code).
#
#   ringlab_target_options(<target>)  warnings (-Wall -Wextra -Wpedantic, -Werror when
#                                     RINGLAB_WERROR), sanitizers, -march=native (or
#                                     -march=RINGLAB_MARCH when RINGLAB_NATIVE is OFF).

set(_ringlab_sanitize_flags "")
if(RINGLAB_SANITIZE)
  set(_ringlab_sanitize_flags -fsanitize=${RINGLAB_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RINGLAB_SANITIZE})
endif()

# GCC 12's -Wrestrict misfires inside libstdc++'s std::string operator+ once inlined
# (GCC bug 105651); a false positive in the standard library, not in our code.
set(_ringlab_gcc_workarounds "")
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  set(_ringlab_gcc_workarounds -Wno-restrict)
endif()
# GCC's flow-based warnings run after the sanitizers' instrumentation, which adds paths the
# analysis cannot see through: in the ASan build GCC 12 reports std::regex's internal
# std::function as "may be used uninitialized" (libstdc++'s <regex>, not our code). GCC's manual
# says as much of -fsanitize; the warning stays on in the normal builds.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND RINGLAB_SANITIZE)
  list(APPEND _ringlab_gcc_workarounds -Wno-maybe-uninitialized)
endif()

function(ringlab_target_options target)
  get_target_property(_type ${target} TYPE)
  set(_scope PRIVATE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  target_compile_options(${target} ${_scope}
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow ${_ringlab_gcc_workarounds}>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGLAB_WERROR}>>:-Werror>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGLAB_NATIVE}>>:-march=native>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<BOOL:${RINGLAB_NATIVE}>>,$<BOOL:${RINGLAB_MARCH}>>:-march=${RINGLAB_MARCH}>
    $<$<COMPILE_LANGUAGE:CXX>:${_ringlab_sanitize_flags}>)
endfunction()

# ringlab_unity(target batch): with RINGLAB_UNITY (the default), the target's files are compiled in
# batches of `batch` (0: all in one), each batch one translation unit: the standard library, Eigen,
# nlohmann-json and CLI11 are parsed once a batch instead of once a file, which is most of a clean
# build's time. Files with compile options of their own stay apart (CMake leaves them out). With
# RINGLAB_UNITY=OFF every file is its own unit, as clang-tidy needs (scripts/test, tidy stage).
function(ringlab_unity target batch)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ${RINGLAB_UNITY} UNITY_BUILD_BATCH_SIZE ${batch})
endfunction()
