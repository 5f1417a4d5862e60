# Writes OUTPUT: a C++ file defining `const char *const SYMBOL` (in namespace NAMESPACE) that
# holds the text of INPUT.
file(READ ${INPUT} text)
file(WRITE ${OUTPUT} "// Generated from ${INPUT}; do not edit.\n"
    "namespace ${NAMESPACE} {\n"
    "extern const char *const ${SYMBOL};\n"
    "const char *const ${SYMBOL} = R\"vpuc_embedded(${text})vpuc_embedded\";\n"
    "}  // namespace ${NAMESPACE}\n")
