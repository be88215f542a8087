"""A `.h` header is C or C++: the function DWARF places a line in tells which (a C
function's name is an identifier; a C++ one's is demangled, with its parameters), so that
a template allocation wrapper or a member function in a C++ header is read with the C++
grammar (LULESH's `template <typename T> T *Allocate(size_t)` in lulesh.h)."""

import pytest

from numaprof.analyzer import srcnames, symbols
from numaprof.analyzer.sourcelang import site_language

HEADER = """\
#include <stdlib.h>
#include <vector>

template <typename T>
T *Allocate(size_t size)
{
   return static_cast<T *>(malloc(sizeof(T)*size)) ;
}

class Domain {
public:
   void AllocateNodePersistent(size_t n) { m_x.resize(n); }
   std::vector<double> m_x;
};
"""


@pytest.mark.parametrize("file, function, lang", [
    ("/src/lulesh.h", "double* Allocate<double>(unsigned long)", "cpp"),
    ("/src/lulesh.h", "Domain::AllocateNodePersistent(int)", "cpp"),
    ("/src/grid.h", "grid_alloc", "c"),
    ("/src/grid.c", "grid_alloc", "c"),
    ("/src/mesh.hpp", "Mesh::allocate(unsigned long)", "cpp"),
    ("/src/adi.f90", "sweep_x", "fortran"),
])
def test_site_language(file, function, lang):
    assert site_language(file, function) == lang


def test_a_template_wrapper_in_a_header_passes_its_block_on(tmp_path):
    path = tmp_path / "lulesh.h"
    path.write_text(HEADER)
    line = HEADER.splitlines().index("   return static_cast<T *>(malloc(sizeof(T)*size)) ;") + 1
    site = symbols.SourceLine("double* Allocate<double>(unsigned long)", str(path), line)
    # read as C (by the extension alone) the template is no function definition; its
    # body is still a block at the file's top level (as a K&R definition's is), the
    # function's
    tree, _ = srcnames._parse(str(path), "c", symbols.EMPTY)
    defs: list = []
    srcnames._collect(tree.root_node, line - 1, ("function_definition",), defs)
    assert not defs
    assert srcnames.returned_part(str(path), line, None, "c") == ""
    assert srcnames.returned_part(str(path), line, None, site_language(site.file, site.function)) == ""
