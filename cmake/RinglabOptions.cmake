# Compile options for ringlab's own targets (never for third-party code).
#
#   ringlab_target_options(<target>)  warnings (-Wall -Wextra -Wpedantic, -Werror when
#                                     RINGLAB_WERROR), sanitizers, -march=native.

set(_ringlab_sanitize_flags "")
if(RINGLAB_SANITIZE)
  set(_ringlab_sanitize_flags -fsanitize=${RINGLAB_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RINGLAB_SANITIZE})
endif()

function(ringlab_target_options target)
  get_target_property(_type ${target} TYPE)
  set(_scope PRIVATE)
  if(_type STREQUAL "INTERFACE_LIBRARY")
    return()
  endif()
  target_compile_options(${target} ${_scope}
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGLAB_WERROR}>>:-Werror>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${RINGLAB_NATIVE}>>:-march=native>
    $<$<COMPILE_LANGUAGE:CXX>:${_ringlab_sanitize_flags}>)
endfunction()
