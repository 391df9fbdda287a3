// A plugin that cannot be opened because a library it needs is missing
// (torchscript_integration_test.cc): the worker must name that library.
extern "C" int GradsyncTestAbsent();
extern "C" int GradsyncTorchPluginApi() { return GradsyncTestAbsent(); }
