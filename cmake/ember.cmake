# Helpers shared by every target.

# Flags for the ISA-specific kernel variants. The rest of the project is built for baseline
# x86-64 so that one binary runs anywhere; the variants are chosen at startup from CPUID.
set(EMBER_AVX2_FLAGS -mavx2 -mfma -mf16c)
set(EMBER_AVX512_FLAGS -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq
    -mavx512bf16 -mavx512vnni)
# The AMX level runs the avx512 kernels plus tile GEMMs (cpu_features.h: the OS state and Linux's
# permission are checked at startup, not here).
set(EMBER_AMX_FLAGS ${EMBER_AVX512_FLAGS} -mamx-tile -mamx-int8)

# ember_library(NAME DEPS ...): a static library from every .cc under src/NAME/.
# Files named *_avx2.cc, *_avx512.cc and *_amx.cc get that ISA's flags.
function(ember_library name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  if(NOT sources)
    # A folder with headers only so far: an interface target keeps the layering explicit.
    add_library(ember_${name} INTERFACE)
    target_include_directories(ember_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(ember_${name} INTERFACE ${ARG_DEPS})
    return()
  endif()
  add_library(ember_${name} STATIC ${sources})
  target_include_directories(ember_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(ember_${name} PUBLIC ${ARG_DEPS})
  foreach(src IN LISTS sources)
    if(src MATCHES "_avx2\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EMBER_AVX2_FLAGS}")
    elseif(src MATCHES "_avx512\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EMBER_AVX512_FLAGS}")
    elseif(src MATCHES "_amx\\.cc$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${EMBER_AMX_FLAGS}")
    endif()
  endforeach()
endfunction()

# Links ember_LIB so that every object in it is kept: architectures (model) and output parsers
# (server) register themselves from static initialisers that nothing references by name, which a
# plain static link would drop.
# One SHELL: option per library: CMake drops repeated link options, so separate
# "--whole-archive" / "--no-whole-archive" items would survive only for the first library.
function(ember_link_whole_archive target lib)
  target_link_libraries(${target} PRIVATE ember_${lib})
  target_link_options(${target} PRIVATE
                      "SHELL:-Wl,--whole-archive $<TARGET_FILE:ember_${lib}> -Wl,--no-whole-archive")
endfunction()
