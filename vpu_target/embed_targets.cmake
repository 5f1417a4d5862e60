# Writes OUTPUT: a C++ file holding each target file in INPUTS as a string, by base name.
set(names "")
set(texts "")
set(count 0)
foreach(input IN LISTS INPUTS)
    get_filename_component(name ${input} NAME_WE)
    file(READ ${input} text)
    string(APPEND names "    \"${name}\",\n")
    string(APPEND texts "    R\"vpuc_target(${text})vpuc_target\",\n")
    math(EXPR count "${count} + 1")
endforeach()
file(WRITE ${OUTPUT} "// Generated from vpu_target/targets/*.json; do not edit.\n"
    "namespace vpuc::target {\n"
    "extern const char *const kBundledTargetNames[] = {\n${names}};\n"
    "extern const char *const kBundledTargetTexts[] = {\n${texts}};\n"
    "extern const int kBundledTargetCount = ${count};\n"
    "}  // namespace vpuc::target\n")
