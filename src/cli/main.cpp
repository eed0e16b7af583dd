#include <cstdio>
int main() { std::puts("diffgemma"); return 0; }
