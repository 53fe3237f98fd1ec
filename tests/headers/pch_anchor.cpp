// The translation unit that builds the test binaries' shared precompiled
// header (volt_test_pch in tests/CMakeLists.txt); it has no code of its own.
