// The live-handle registry behind CGRT_ERROR_INVALID_HANDLE, and the storage of handle
// objects, whose addresses are never handed out twice.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "runtime/handles.h"
#include "tests/common/test_util.h"

namespace {

TEST(Handles, AddLookupRemoveByKind) {
  void *a = cgrt__handle_alloc(64), *b = cgrt__handle_alloc(64);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(cgrt__handle_live(a, CGRT__HANDLE_GRAPHS));
  ASSERT_EQ(cgrt__handle_add(a, CGRT__HANDLE_GRAPHS), 0);
  EXPECT_EQ(cgrt__handle_add(a, CGRT__HANDLE_GRAPHS), -1);  // already live
  EXPECT_TRUE(cgrt__handle_live(a, CGRT__HANDLE_GRAPHS));
  EXPECT_FALSE(cgrt__handle_live(a, CGRT__HANDLE_RUNTIME));  // wrong kind is not live
  EXPECT_FALSE(cgrt__handle_live(b, CGRT__HANDLE_GRAPHS));
  EXPECT_FALSE(cgrt__handle_live(nullptr, CGRT__HANDLE_GRAPHS));
  EXPECT_EQ(cgrt__handle_remove(a, CGRT__HANDLE_RUNTIME), 0);
  EXPECT_EQ(cgrt__handle_remove(a, CGRT__HANDLE_GRAPHS), 1);
  EXPECT_EQ(cgrt__handle_remove(a, CGRT__HANDLE_GRAPHS), 0);  // second destroy detected
  EXPECT_FALSE(cgrt__handle_live(a, CGRT__HANDLE_GRAPHS));
  EXPECT_EQ(cgrt__handle_add(nullptr, CGRT__HANDLE_GRAPHS), -1);
  cgrt__handle_free(a);
  cgrt__handle_free(b);
  cgrt__handle_free(nullptr);
}

TEST(Handles, OnlyAllocatedHandleStorageRegisters) {
  int on_stack = 0;
  std::vector<char> heap(4096);
  EXPECT_EQ(cgrt__handle_add(&on_stack, CGRT__HANDLE_GRAPHS), -1);
  EXPECT_EQ(cgrt__handle_add(heap.data(), CGRT__HANDLE_GRAPHS), -1);
  char *p = static_cast<char *>(cgrt__handle_alloc(100));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(cgrt__handle_add(p + 8, CGRT__HANDLE_GRAPHS), -1) << "inside a block, not its start";
  for (int i = 0; i < 100; i++) EXPECT_EQ(p[i], 0) << "zeroed";
  cgrt__handle_free(p);
  EXPECT_EQ(cgrt__handle_add(p, CGRT__HANDLE_GRAPHS), -1) << "freed storage";
  EXPECT_EQ(cgrt__handle_alloc(0), nullptr);
}

// Freed storage is never handed out again, across sizes and many cycles (the address of
// a destroyed handle can never name a new object).
TEST(Handles, StorageAddressesAreNeverReissued) {
  std::set<void *> seen;
  for (int i = 0; i < 3000; i++) {
    size_t bytes = 1 + (size_t)(i % 7) * 3000;
    void *p = cgrt__handle_alloc(bytes);
    ASSERT_NE(p, nullptr) << i;
    EXPECT_TRUE(seen.insert(p).second) << "address handed out twice at cycle " << i;
    static_cast<char *>(p)[bytes - 1] = 1;  // writable to its last byte
    cgrt__handle_free(p);
  }
}

TEST(Handles, ManyCyclesReuseTombstones) {
  std::vector<void *> objs(1000);
  for (auto &o : objs) ASSERT_NE(o = cgrt__handle_alloc(16), nullptr);
  for (int round = 0; round < 20; round++) {
    for (auto o : objs) ASSERT_EQ(cgrt__handle_add(o, CGRT__HANDLE_MLA_PLAN), 0);
    for (auto o : objs) ASSERT_TRUE(cgrt__handle_live(o, CGRT__HANDLE_MLA_PLAN));
    for (size_t i = 0; i < objs.size(); i += 2) ASSERT_EQ(cgrt__handle_remove(objs[i], CGRT__HANDLE_MLA_PLAN), 1);
    for (size_t i = 0; i < objs.size(); i++)
      ASSERT_EQ(cgrt__handle_live(objs[i], CGRT__HANDLE_MLA_PLAN), i % 2 == 1);
    for (size_t i = 1; i < objs.size(); i += 2) ASSERT_EQ(cgrt__handle_remove(objs[i], CGRT__HANDLE_MLA_PLAN), 1);
  }
  for (auto o : objs) cgrt__handle_free(o);
}

// Issue 14, item 2: a destroyed runtime's handle never names the next runtime.
TEST(Handles, DestroyedRuntimeHandleNeverNamesANewRuntime) {
  for (int round = 0; round < 8; round++) {
    cgrt_runtime *old_rt = cgrt_test::make_runtime();
    ASSERT_NE(old_rt, nullptr);
    CGRT_ASSERT_OK(cgrt_runtime_destroy(old_rt));
    cgrt_runtime *new_rt = cgrt_test::make_runtime();
    ASSERT_NE(new_rt, nullptr);
    EXPECT_NE(new_rt, old_rt) << "round " << round << ": the new runtime took the destroyed one's address";
    cgrt_runtime_info info{};
    info.size = sizeof info;
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_get_info(old_rt, &info));
    CGRT_EXPECT_STATUS(CGRT_ERROR_INVALID_HANDLE, cgrt_runtime_destroy(old_rt));
    EXPECT_EQ(cgrt_runtime_get_info(new_rt, &info), CGRT_SUCCESS) << "destroying the old handle left it alive";
    CGRT_ASSERT_OK(cgrt_runtime_destroy(new_rt));
  }
}

}  // namespace
