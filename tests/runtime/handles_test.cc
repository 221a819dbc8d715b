// The live-handle registry behind CGRT_ERROR_INVALID_HANDLE.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/handles.h"

namespace {

TEST(Handles, AddLookupRemoveByKind) {
  int a = 0, b = 0;
  EXPECT_FALSE(cgrt__handle_live(&a, CGRT__HANDLE_GRAPHS));
  ASSERT_EQ(cgrt__handle_add(&a, CGRT__HANDLE_GRAPHS), 0);
  EXPECT_TRUE(cgrt__handle_live(&a, CGRT__HANDLE_GRAPHS));
  EXPECT_FALSE(cgrt__handle_live(&a, CGRT__HANDLE_RUNTIME));  // wrong kind is not live
  EXPECT_FALSE(cgrt__handle_live(&b, CGRT__HANDLE_GRAPHS));
  EXPECT_FALSE(cgrt__handle_live(nullptr, CGRT__HANDLE_GRAPHS));
  EXPECT_EQ(cgrt__handle_remove(&a, CGRT__HANDLE_RUNTIME), 0);
  EXPECT_EQ(cgrt__handle_remove(&a, CGRT__HANDLE_GRAPHS), 1);
  EXPECT_EQ(cgrt__handle_remove(&a, CGRT__HANDLE_GRAPHS), 0);  // second destroy detected
  EXPECT_FALSE(cgrt__handle_live(&a, CGRT__HANDLE_GRAPHS));
  EXPECT_EQ(cgrt__handle_add(nullptr, CGRT__HANDLE_GRAPHS), -1);
}

TEST(Handles, ManyCyclesReuseTombstones) {
  std::vector<int> objs(1000);
  for (int round = 0; round < 20; round++) {
    for (auto &o : objs) ASSERT_EQ(cgrt__handle_add(&o, CGRT__HANDLE_MLA_PLAN), 0);
    for (auto &o : objs) ASSERT_TRUE(cgrt__handle_live(&o, CGRT__HANDLE_MLA_PLAN));
    for (size_t i = 0; i < objs.size(); i += 2) ASSERT_EQ(cgrt__handle_remove(&objs[i], CGRT__HANDLE_MLA_PLAN), 1);
    for (size_t i = 0; i < objs.size(); i++)
      ASSERT_EQ(cgrt__handle_live(&objs[i], CGRT__HANDLE_MLA_PLAN), i % 2 == 1);
    for (size_t i = 1; i < objs.size(); i += 2) ASSERT_EQ(cgrt__handle_remove(&objs[i], CGRT__HANDLE_MLA_PLAN), 1);
  }
}

}  // namespace
