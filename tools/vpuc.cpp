// vpuc: the command-line driver. Each subcommand lives in its own file and registers here.
#include <cstdio>
#include <cstring>
#include <string>

#include "vpu_target/target.h"

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    auto t = vpuc::target::load_target("vpu27");
    std::printf("%s\n", t.description.c_str());
    return 0;
}
