# Writes the ctest entries of one GoogleTest executable: one entry per test suite, or per shard
# of at most MAX_CASES cases for a large suite, each running its cases in one process with
# --gtest_filter. Run after the executable is built (tests/CMakeLists.txt). An entry is named
# <executable>.<suite>, with .part<k>of<n> for a shard.
#
# One process per case, as gtest_discover_tests gives, spent most of a short case's time
# loading the process and setting up Halide and LLVM; over some 2,000 cases that was a third of
# ctest. A failure is still named: gtest prints the failing case and its message.
#
# Inputs (-D): EXE, the executable; OUT, the ctest file to write; ENVIRONMENT, the tests'
# environment (NAME=value); MAX_CASES; TIMEOUT, seconds allowed for listing the tests.
foreach(input EXE OUT MAX_CASES TIMEOUT)
    if(NOT DEFINED ${input})
        message(FATAL_ERROR "write_gtest_shards.cmake: ${input} is not set")
    endif()
endforeach()

execute_process(COMMAND "${EXE}" --gtest_list_tests
    OUTPUT_VARIABLE listing ERROR_VARIABLE listing_errors RESULT_VARIABLE status
    TIMEOUT ${TIMEOUT})
if(NOT status EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${status}):\n${listing}${listing_errors}")
endif()

# The listing has a line "Suite." per suite, then "  Case" per case (a parameterized case adds
# "  # GetParam() = ..."). Cases named DISABLED_ are not run, as gtest itself does not.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(suite "")
foreach(line IN LISTS lines)
    if(line MATCHES "^([A-Za-z_0-9/]+)\\.$")
        set(suite "${CMAKE_MATCH_1}")
        string(MAKE_C_IDENTIFIER "${suite}" suite_id)
        list(APPEND suites "${suite}")
        set(cases_${suite_id} "")
    elseif(line MATCHES "^  ([A-Za-z_0-9/]+)" AND NOT suite STREQUAL "")
        set(case "${CMAKE_MATCH_1}")
        if(NOT case MATCHES "^DISABLED_" AND NOT suite MATCHES "(^|/)DISABLED_")
            list(APPEND cases_${suite_id} "${suite}.${case}")
        endif()
    endif()
endforeach()

get_filename_component(exe_dir "${EXE}" DIRECTORY)
get_filename_component(exe_name "${EXE}" NAME)
set(script "")
foreach(suite IN LISTS suites)
    string(MAKE_C_IDENTIFIER "${suite}" suite_id)
    list(LENGTH cases_${suite_id} count)
    if(count EQUAL 0)
        continue()
    endif()
    math(EXPR shards "(${count} + ${MAX_CASES} - 1) / ${MAX_CASES}")
    # Cases are dealt round-robin: neighbours are often alike in cost (one op in each of its
    # element types), and dealing spreads them over the shards.
    math(EXPR last_shard "${shards} - 1")
    foreach(shard RANGE ${last_shard})
        set(filter "")
        set(index 0)
        foreach(name IN LISTS cases_${suite_id})
            math(EXPR owner "${index} % ${shards}")
            if(owner EQUAL shard)
                string(APPEND filter ":${name}")
            endif()
            math(EXPR index "${index} + 1")
        endforeach()
        string(SUBSTRING "${filter}" 1 -1 filter)
        if(shards EQUAL 1)
            set(test_name "${exe_name}.${suite}")
            set(filter "${suite}.*")
        else()
            math(EXPR number "${shard} + 1")
            set(test_name "${exe_name}.${suite}.part${number}of${shards}")
        endif()
        string(APPEND script
            "add_test([=[${test_name}]=] [=[${EXE}]=] [=[--gtest_filter=${filter}]=])\n"
            "set_tests_properties([=[${test_name}]=] PROPERTIES WORKING_DIRECTORY [=[${exe_dir}]=]"
            " ENVIRONMENT [=[${ENVIRONMENT}]=])\n")
    endforeach()
endforeach()
file(WRITE "${OUT}" "${script}")
