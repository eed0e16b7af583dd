#include "cli/app.h"

int main(int argc, char** argv) { return dg::cli::run(argc, argv); }
