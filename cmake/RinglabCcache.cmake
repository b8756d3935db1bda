# Compile through ccache when it is installed (scripts/setup installs it) and RINGLAB_CCACHE is on.
#
# Paths under the source folder are hashed relative to it (CCACHE_BASEDIR) and the working folder
# is left out of the hash (CCACHE_NOHASHDIR), so every build folder of every clone shares one cache:
# the sanitizer builds re-use nothing of the default build (other flags), but a second clone, a
# CI run after a session or a rebuild after `git switch` compiles only what changed.
if(NOT RINGLAB_CCACHE OR CMAKE_CXX_COMPILER_LAUNCHER)
  return()
endif()
find_program(RINGLAB_CCACHE_PROGRAM ccache)
if(NOT RINGLAB_CCACHE_PROGRAM)
  message(STATUS "ringlab: ccache not found (scripts/setup installs it); compiling without a cache")
  return()
endif()
set(_ringlab_launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
                      CCACHE_MAXSIZE=12G ${RINGLAB_CCACHE_PROGRAM})
set(CMAKE_C_COMPILER_LAUNCHER ${_ringlab_launcher})
set(CMAKE_CXX_COMPILER_LAUNCHER ${_ringlab_launcher})
set(CMAKE_CUDA_COMPILER_LAUNCHER ${_ringlab_launcher})
message(STATUS "ringlab: ccache: ${RINGLAB_CCACHE_PROGRAM} (RINGLAB_CCACHE=OFF to compile without it)")
