// Prints a blob in the JSON form the blob regression inputs use (tests/fuzz/regressions/blob/,
// docs/fuzzing.md): FlatBuffers' JSON form of the blob schema, every scalar included, indented.
//
//   usage: blob_json BLOB > tests/fuzz/regressions/blob/what-it-shows.json
#include <cstdio>
#include <exception>

#include "blob_mutator.h"
#include "vpu_target/blob.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s BLOB\n", argv[0]);
        return 2;
    }
    try {
        const auto json = vpuc::fuzz::BlobMutator().to_json(vpuc::blob::read_file(argv[1]));
        if (!json) {
            std::fprintf(stderr, "%s: not a well-formed FlatBuffer of the blob schema\n", argv[1]);
            return 1;
        }
        std::fputs(json->c_str(), stdout);
        return 0;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "blob_json: %s\n", e.what());
        return 1;
    }
}
