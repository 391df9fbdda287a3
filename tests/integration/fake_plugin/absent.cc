// A library that the fake plugin needs and that is not where the dynamic
// loader looks (tests/CMakeLists.txt), as libtorch is on a machine without it.
extern "C" int GradsyncTestAbsent() { return 1; }
