// Runs a shell command for tests that check a program's output and exit status.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace vpuc::tests {

struct CommandRun {
    int status = -1;    // exit status (-1 when the command did not exit normally)
    std::string output; // stdout and stderr
};

// `command` run by the shell, its stderr merged into the stdout captured.
inline CommandRun run_command(const std::string &command) {
    CommandRun run;
    FILE *pipe = ::popen((command + " 2>&1").c_str(), "r");
    if (!pipe) return run;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
        run.output.append(buffer, n);
    const int status = ::pclose(pipe);
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
}

} // namespace vpuc::tests
