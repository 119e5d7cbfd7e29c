import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pythonImportProblem } from '../../src/testing/python-import-problem.js';

/*
 * Real outputs, captured from small repositories in /tmp (`pkg/` with `tests/`), some copied to
 * /tmp/workspace, with `python3 -m pytest` (pytest 9.0.3 on Python 3.11.7, pyenv) or
 * `/usr/bin/python3 -m pytest` (pytest 7.2.1, Debian), and `python3 -m unittest`.
 */

/** (1) circular import in pkg/, `python3 -m pytest` (pytest 9.0.3, Python 3.11.7). */
const CIRCULAR_PYTEST9 = `============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0
benchmark: 5.2.3 (defaults: timer=time.perf_counter disable_gc=False min_rounds=5 min_time=0.000005 max_time=1.0 calibration_precision=10 warmup=False warmup_iterations=100000)
rootdir: /tmp/pyimp/c1
plugins: hypothesis-6.155.2, benchmark-5.2.3
collected 0 items / 1 error

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_a.py _______________________
ImportError while importing test module '/tmp/pyimp/c1/tests/test_a.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_a.py:1: in <module>
    from pkg.a import helper_a
pkg/a.py:1: in <module>
    from pkg.b import helper_b
pkg/b.py:1: in <module>
    from pkg.a import helper_a
E   ImportError: cannot import name 'helper_a' from partially initialized module 'pkg.a' (most likely due to a circular import) (/tmp/pyimp/c1/pkg/a.py)
=========================== short test summary info ============================
ERROR tests/test_a.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 2.70s ===============================
`;

/** (1) the same repository at /tmp/workspace, `/usr/bin/python3 -m pytest -q` (pytest 7.2.1, Debian). */
const CIRCULAR_PYTEST7_WORKSPACE_Q = `
==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_a.py _______________________
ImportError while importing test module '/tmp/workspace/tests/test_a.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_a.py:1: in <module>
    from pkg.a import helper_a
pkg/a.py:1: in <module>
    from pkg.b import helper_b
pkg/b.py:1: in <module>
    from pkg.a import helper_a
E   ImportError: cannot import name 'helper_a' from partially initialized module 'pkg.a' (most likely due to a circular import) (/tmp/workspace/pkg/a.py)
=========================== short test summary info ============================
ERROR tests/test_a.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.10s
`;

/** (1) the same, `python3 -m unittest` (absolute frames). */
const CIRCULAR_UNITTEST_WORKSPACE = `E
======================================================================
ERROR: tests.test_a (unittest.loader._FailedTest.tests.test_a)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_a
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/workspace/tests/test_a.py", line 1, in <module>
    from pkg.a import helper_a
  File "/tmp/workspace/pkg/a.py", line 1, in <module>
    from pkg.b import helper_b
  File "/tmp/workspace/pkg/b.py", line 1, in <module>
    from pkg.a import helper_a
ImportError: cannot import name 'helper_a' from partially initialized module 'pkg.a' (most likely due to a circular import) (/tmp/workspace/pkg/a.py)


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (2) `from pkg.mod import missing_name`, `pytest -q`. */
const MISSING_NAME_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
ImportError while importing test module '/tmp/pyimp/c2/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    from pkg.mod import missing_name
E   ImportError: cannot import name 'missing_name' from 'pkg.mod' (/tmp/pyimp/c2/pkg/mod.py)
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.00s
`;

/** (2) the same, `python3 -m unittest`. */
const MISSING_NAME_UNITTEST = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c2/tests/test_mod.py", line 1, in <module>
    from pkg.mod import missing_name
ImportError: cannot import name 'missing_name' from 'pkg.mod' (/tmp/pyimp/c2/pkg/mod.py)


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (3) SyntaxError in pkg/mod.py, `pytest` (the frames are pytest's own, the location is a `File` line). */
const SYNTAX_PYTEST9 = `============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0
benchmark: 5.2.3 (defaults: timer=time.perf_counter disable_gc=False min_rounds=5 min_time=0.000005 max_time=1.0 calibration_precision=10 warmup=False warmup_iterations=100000)
rootdir: /tmp/pyimp/c3
plugins: hypothesis-6.155.2, benchmark-5.2.3
collected 0 items / 1 error

==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/_pytest/python.py:507: in importtestmodule
    mod = import_path(
/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/_pytest/pathlib.py:587: in import_path
    importlib.import_module(module_name)
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
<frozen importlib._bootstrap>:1204: in _gcd_import
    ???
<frozen importlib._bootstrap>:1176: in _find_and_load
    ???
<frozen importlib._bootstrap>:1147: in _find_and_load_unlocked
    ???
<frozen importlib._bootstrap>:690: in _load_unlocked
    ???
/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/_pytest/assertion/rewrite.py:197: in exec_module
    exec(co, module.__dict__)
tests/test_mod.py:1: in <module>
    from pkg.mod import f
E     File "/tmp/pyimp/c3/pkg/mod.py", line 1
E       def f(:
E             ^
E   SyntaxError: invalid syntax
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 1.57s ===============================
`;

/** (3) the same at /tmp/workspace, pytest 7 (dist-packages frames). */
const SYNTAX_PYTEST7_WORKSPACE = `============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0+repack
rootdir: /tmp/workspace
collected 0 items / 1 error

==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
/usr/lib/python3/dist-packages/_pytest/python.py:618: in _importtestmodule
    mod = import_path(self.path, mode=importmode, root=self.config.rootpath)
/usr/lib/python3/dist-packages/_pytest/pathlib.py:533: in import_path
    importlib.import_module(module_name)
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
<frozen importlib._bootstrap>:1206: in _gcd_import
    ???
<frozen importlib._bootstrap>:1178: in _find_and_load
    ???
<frozen importlib._bootstrap>:1149: in _find_and_load_unlocked
    ???
<frozen importlib._bootstrap>:690: in _load_unlocked
    ???
/usr/lib/python3/dist-packages/_pytest/assertion/rewrite.py:168: in exec_module
    exec(co, module.__dict__)
tests/test_mod.py:1: in <module>
    from pkg.mod import f
E     File "/tmp/workspace/pkg/mod.py", line 1
E       def f(:
E             ^
E   SyntaxError: invalid syntax
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.14s ===============================
`;

/** (3) the same, unittest. */
const SYNTAX_UNITTEST_WORKSPACE = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/workspace/tests/test_mod.py", line 1, in <module>
    from pkg.mod import f
  File "/tmp/workspace/pkg/mod.py", line 1
    def f(:
          ^
SyntaxError: invalid syntax


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (4) NameError at import time in pkg/mod.py, `pytest -q`. */
const NAME_ERROR_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
tests/test_mod.py:1: in <module>
    from pkg.mod import f
pkg/mod.py:4: in <module>
    VALUE = undefined_thing + 1
            ^^^^^^^^^^^^^^^
E   NameError: name 'undefined_thing' is not defined
=========================== short test summary info ============================
ERROR tests/test_mod.py - NameError: name 'undefined_thing' is not defined
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.74s
`;

/** (4) the same, unittest. */
const NAME_ERROR_UNITTEST = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c4/tests/test_mod.py", line 1, in <module>
    from pkg.mod import f
  File "/tmp/pyimp/c4/pkg/mod.py", line 4, in <module>
    VALUE = undefined_thing + 1
            ^^^^^^^^^^^^^^^
NameError: name 'undefined_thing' is not defined


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (5) a test imports a module that is not installed, `pytest`. */
const TEST_IMPORTS_MISSING_PYTEST9 = `============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0
benchmark: 5.2.3 (defaults: timer=time.perf_counter disable_gc=False min_rounds=5 min_time=0.000005 max_time=1.0 calibration_precision=10 warmup=False warmup_iterations=100000)
rootdir: /tmp/pyimp/c5
plugins: hypothesis-6.155.2, benchmark-5.2.3
collected 0 items / 1 error

==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
ImportError while importing test module '/tmp/pyimp/c5/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 1.72s ===============================
`;

/** (5) the same, unittest. */
const TEST_IMPORTS_MISSING_UNITTEST = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c5/tests/test_mod.py", line 1, in <module>
    import requests_not_installed
ModuleNotFoundError: No module named 'requests_not_installed'


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (6) pkg/mod.py imports a module that is not installed, at /tmp/workspace, `pytest --tb=short`. */
const OWN_MODULE_IMPORTS_MISSING_PYTEST9_WORKSPACE = `============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0
benchmark: 5.2.3 (defaults: timer=time.perf_counter disable_gc=False min_rounds=5 min_time=0.000005 max_time=1.0 calibration_precision=10 warmup=False warmup_iterations=100000)
rootdir: /tmp/workspace
plugins: hypothesis-6.155.2, benchmark-5.2.3
collected 0 items / 1 error

==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
ImportError while importing test module '/tmp/workspace/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    from pkg.mod import f
pkg/mod.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.79s ===============================
`;

/** (6) the same, unittest. */
const OWN_MODULE_IMPORTS_MISSING_UNITTEST_WORKSPACE = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/workspace/tests/test_mod.py", line 1, in <module>
    from pkg.mod import f
  File "/tmp/workspace/pkg/mod.py", line 1, in <module>
    import requests_not_installed
ModuleNotFoundError: No module named 'requests_not_installed'


----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (errors=1)
`;

/** (7) a test imports pkg.newmod, which does not exist; no frame under pkg/. */
const NEW_SUBMODULE_FROM_TEST_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
ImportError while importing test module '/tmp/pyimp/c7/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    from pkg.newmod import f
E   ModuleNotFoundError: No module named 'pkg.newmod'
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.67s
`;

/** (7) the same, unittest. */
const NEW_SUBMODULE_FROM_TEST_UNITTEST = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c7/tests/test_mod.py", line 1, in <module>
    from pkg.newmod import f
ModuleNotFoundError: No module named 'pkg.newmod'


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (7b) pkg/api.py imports pkg.newmod, which does not exist. */
const NEW_SUBMODULE_FROM_PACKAGE_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_mod.py ______________________
ImportError while importing test module '/tmp/pyimp/c7b/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    from pkg.api import f
pkg/api.py:1: in <module>
    from pkg.newmod import f
E   ModuleNotFoundError: No module named 'pkg.newmod'
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.95s
`;

/** (7b) the same, unittest. */
const NEW_SUBMODULE_FROM_PACKAGE_UNITTEST = `E
======================================================================
ERROR: tests.test_mod (unittest.loader._FailedTest.tests.test_mod)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_mod
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c7b/tests/test_mod.py", line 1, in <module>
    from pkg.api import f
  File "/tmp/pyimp/c7b/pkg/api.py", line 1, in <module>
    from pkg.newmod import f
ModuleNotFoundError: No module named 'pkg.newmod'


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (8) conftest.py imports a module that is not installed, `pytest` (exit 4). */
const CONFTEST_IMPORTS_MISSING_PYTEST9 = `ImportError while loading conftest '/tmp/pyimp/c8/conftest.py'.
conftest.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'
`;

/** (8) the same, `pytest -q`. */
const CONFTEST_IMPORTS_MISSING_PYTEST9_Q = `ImportError while loading conftest '/tmp/pyimp/c8/conftest.py'.
conftest.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'
`;

/** (8b) `pytest_plugins = ["pytest_not_installed_plugin"]`, pytest 7 -q; the middle frames trimmed. */
const MISSING_PLUGIN_PYTEST7_Q = `Traceback (most recent call last):
  File "/usr/lib/python3/dist-packages/_pytest/config/__init__.py", line 774, in import_plugin
    __import__(importspec)
ModuleNotFoundError: No module named 'pytest_not_installed_plugin'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  [... pluggy and _pytest frames trimmed ...]
  File "/usr/lib/python3/dist-packages/_pytest/config/__init__.py", line 776, in import_plugin
    raise ImportError(
  File "/usr/lib/python3/dist-packages/_pytest/config/__init__.py", line 774, in import_plugin
    __import__(importspec)
ImportError: Error importing plugin "pytest_not_installed_plugin": No module named 'pytest_not_installed_plugin'
`;

/** (9) `from json import ...` and `from pytest import ...` of names they lack. */
const CANNOT_IMPORT_FROM_STDLIB_AND_SITE_PACKAGES_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_std.py ______________________
ImportError while importing test module '/tmp/pyimp/c9/tests/test_std.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_std.py:1: in <module>
    from json import not_a_name
E   ImportError: cannot import name 'not_a_name' from 'json' (/root/.pyenv/versions/3.11.7/lib/python3.11/json/__init__.py)
______________________ ERROR collecting tests/test_tp.py _______________________
ImportError while importing test module '/tmp/pyimp/c9/tests/test_tp.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_tp.py:1: in <module>
    from pytest import not_a_name
E   ImportError: cannot import name 'not_a_name' from 'pytest' (/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/pytest/__init__.py)
=========================== short test summary info ============================
ERROR tests/test_std.py
ERROR tests/test_tp.py
!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!
2 errors in 0.83s
`;

/** (9) the same, unittest. */
const CANNOT_IMPORT_FROM_STDLIB_AND_SITE_PACKAGES_UNITTEST = `EE
======================================================================
ERROR: tests.test_std (unittest.loader._FailedTest.tests.test_std)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_std
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c9/tests/test_std.py", line 1, in <module>
    from json import not_a_name
ImportError: cannot import name 'not_a_name' from 'json' (/root/.pyenv/versions/3.11.7/lib/python3.11/json/__init__.py)


======================================================================
ERROR: tests.test_tp (unittest.loader._FailedTest.tests.test_tp)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_tp
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c9/tests/test_tp.py", line 1, in <module>
    from pytest import not_a_name
ImportError: cannot import name 'not_a_name' from 'pytest' (/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages/pytest/__init__.py)


----------------------------------------------------------------------
Ran 2 tests in 0.000s

FAILED (errors=2)
`;

/** (9b) `from pytest import ...`, Debian pytest 7 (dist-packages). */
const CANNOT_IMPORT_FROM_DIST_PACKAGES_PYTEST7_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_tp.py _______________________
ImportError while importing test module '/tmp/pyimp/c16/tests/test_tp.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/usr/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
tests/test_tp.py:1: in <module>
    from pytest import not_a_name
E   ImportError: cannot import name 'not_a_name' from 'pytest' (/usr/lib/python3/dist-packages/pytest/__init__.py)
=========================== short test summary info ============================
ERROR tests/test_tp.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.05s
`;

/** (10) an installed package raises RuntimeError on import (PYTHONPATH=/tmp/pyimp/fake/lib/python3.11/site-packages). */
const BROKEN_DEPENDENCY_PYTEST9_Q = `
==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_b.py _______________________
tests/test_b.py:1: in <module>
    import brokenlib
../fake/lib/python3.11/site-packages/brokenlib/__init__.py:1: in <module>
    raise RuntimeError("brokenlib needs numpy<2")
E   RuntimeError: brokenlib needs numpy<2
=========================== short test summary info ============================
ERROR tests/test_b.py - RuntimeError: brokenlib needs numpy<2
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.11s
`;

/** (10) the same, unittest. */
const BROKEN_DEPENDENCY_UNITTEST = `E
======================================================================
ERROR: tests.test_b (unittest.loader._FailedTest.tests.test_b)
----------------------------------------------------------------------
ImportError: Failed to import test module: tests.test_b
Traceback (most recent call last):
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 419, in _find_test_path
    module = self._get_module_from_name(name)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/root/.pyenv/versions/3.11.7/lib/python3.11/unittest/loader.py", line 362, in _get_module_from_name
    __import__(name)
  File "/tmp/pyimp/c10/tests/test_b.py", line 1, in <module>
    import brokenlib
  File "/tmp/pyimp/fake/lib/python3.11/site-packages/brokenlib/__init__.py", line 1, in <module>
    raise RuntimeError("brokenlib needs numpy<2")
RuntimeError: brokenlib needs numpy<2


----------------------------------------------------------------------
Ran 1 test in 0.000s

FAILED (errors=1)
`;

/** (11) one test file hits the circular import, another a missing module. */
const MIXED_OWN_AND_MISSING_PYTEST9_Q = `
==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_a.py _______________________
ImportError while importing test module '/tmp/pyimp/c12/tests/test_a.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_a.py:1: in <module>
    from pkg.a import helper_a
pkg/a.py:1: in <module>
    from pkg.b import helper_b
pkg/b.py:1: in <module>
    from pkg.a import helper_a
E   ImportError: cannot import name 'helper_a' from partially initialized module 'pkg.a' (most likely due to a circular import) (/tmp/pyimp/c12/pkg/a.py)
______________________ ERROR collecting tests/test_dep.py ______________________
ImportError while importing test module '/tmp/pyimp/c12/tests/test_dep.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_dep.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'
=========================== short test summary info ============================
ERROR tests/test_a.py
ERROR tests/test_dep.py
!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!!
2 errors in 0.99s
`;

/** (12) a test body imports pkg.gone (a test failure, not collection). */
const MISSING_SUBMODULE_IN_TEST_BODY_PYTEST9_Q = `F                                                                        [100%]
=================================== FAILURES ===================================
___________________________________ test_imp ___________________________________

    def test_imp():
>       from pkg.gone import x
E       ModuleNotFoundError: No module named 'pkg.gone'

tests/test_in.py:2: ModuleNotFoundError
=========================== short test summary info ============================
FAILED tests/test_in.py::test_imp - ModuleNotFoundError: No module named 'pkg...
1 failed in 0.76s
`;

/** (13) `from nspkg import x` of a namespace package (no __init__.py). */
const UNKNOWN_LOCATION_PYTEST9_Q = `
==================================== ERRORS ====================================
______________________ ERROR collecting tests/test_ns.py _______________________
ImportError while importing test module '/tmp/pyimp/c15/tests/test_ns.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_ns.py:1: in <module>
    from nspkg import x
E   ImportError: cannot import name 'x' from 'nspkg' (unknown location)
=========================== short test summary info ============================
ERROR tests/test_ns.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 0.79s
`;

/** (2) with `--tb=no`: only the summary is left. */
const TB_NO_PYTEST9_Q = `
=========================== short test summary info ============================
ERROR tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
1 error in 1.05s
`;

/** (14) an ordinary failing test. */
const ASSERTION_FAILURE_PYTEST9_Q = `F                                                                        [100%]
=================================== FAILURES ===================================
____________________________________ test_f ____________________________________

    def test_f():
>       assert 1 == 2
E       assert 1 == 2

tests/test_f.py:2: AssertionError
=========================== short test summary info ============================
FAILED tests/test_f.py::test_f - assert 1 == 2
1 failed in 0.69s
`;

/** (1) `pytest -q --color=yes`. */
const CIRCULAR_PYTEST9_COLOR = `
==================================== ERRORS ====================================
\x1b[31m\x1b[1m_______________________ ERROR collecting tests/test_a.py _______________________\x1b[0m
\x1b[31mImportError while importing test module '/tmp/pyimp/c1/tests/test_a.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_a.py:1: in <module>
    from pkg.a import helper_a
pkg/a.py:1: in <module>
    from pkg.b import helper_b
pkg/b.py:1: in <module>
    from pkg.a import helper_a
E   ImportError: cannot import name 'helper_a' from partially initialized module 'pkg.a' (most likely due to a circular import) (/tmp/pyimp/c1/pkg/a.py)\x1b[0m
\x1b[36m\x1b[1m=========================== short test summary info ============================\x1b[0m
\x1b[31mERROR\x1b[0m tests/test_a.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
\x1b[31m\x1b[31m\x1b[1m1 error\x1b[0m\x1b[31m in 0.87s\x1b[0m\x1b[0m
`;

/** (5) `pytest -q --color=yes`. */
const TEST_IMPORTS_MISSING_PYTEST9_COLOR = `
==================================== ERRORS ====================================
\x1b[31m\x1b[1m______________________ ERROR collecting tests/test_mod.py ______________________\x1b[0m
\x1b[31mImportError while importing test module '/tmp/pyimp/c5/tests/test_mod.py'.
Hint: make sure your test modules/packages have valid Python names.
Traceback:
/root/.pyenv/versions/3.11.7/lib/python3.11/importlib/__init__.py:126: in import_module
    return _bootstrap._gcd_import(name[level:], package, level)
           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
tests/test_mod.py:1: in <module>
    import requests_not_installed
E   ModuleNotFoundError: No module named 'requests_not_installed'\x1b[0m
\x1b[36m\x1b[1m=========================== short test summary info ============================\x1b[0m
\x1b[31mERROR\x1b[0m tests/test_mod.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
\x1b[31m\x1b[31m\x1b[1m1 error\x1b[0m\x1b[31m in 0.89s\x1b[0m\x1b[0m
`;

const MODULE = 'a Python module could not be imported';
const IMPORT = 'a Python import failed';
const COLLECT = 'pytest could not collect the tests';

describe('pythonImportProblem: failures of the repository own code are not the environment', () => {
  const own: [string, string][] = [
    ['circular import, pytest 9', CIRCULAR_PYTEST9],
    ['circular import, pytest 7 -q at /tmp/workspace', CIRCULAR_PYTEST7_WORKSPACE_Q],
    ['circular import, unittest at /tmp/workspace', CIRCULAR_UNITTEST_WORKSPACE],
    ['circular import, pytest --color=yes', CIRCULAR_PYTEST9_COLOR],
    ['cannot import a name pkg/mod.py lacks, pytest -q', MISSING_NAME_PYTEST9_Q],
    ['cannot import a name pkg/mod.py lacks, unittest', MISSING_NAME_UNITTEST],
    ['SyntaxError in pkg/mod.py, pytest 9', SYNTAX_PYTEST9],
    ['SyntaxError in pkg/mod.py, pytest 7 at /tmp/workspace', SYNTAX_PYTEST7_WORKSPACE],
    ['SyntaxError in pkg/mod.py, unittest at /tmp/workspace', SYNTAX_UNITTEST_WORKSPACE],
    ['NameError at import of pkg/mod.py, pytest -q', NAME_ERROR_PYTEST9_Q],
    ['NameError at import of pkg/mod.py, unittest', NAME_ERROR_UNITTEST],
    ['pkg/api.py imports pkg.newmod that does not exist, pytest -q', NEW_SUBMODULE_FROM_PACKAGE_PYTEST9_Q],
    ['pkg/api.py imports pkg.newmod that does not exist, unittest', NEW_SUBMODULE_FROM_PACKAGE_UNITTEST],
  ];
  for (const [name, output] of own) {
    test(name, () => {
      assert.equal(pythonImportProblem(output), null);
    });
  }

  test('a missing submodule of a package the caller names as the repository own', () => {
    assert.equal(pythonImportProblem(NEW_SUBMODULE_FROM_TEST_PYTEST9_Q, { ownModules: ['pkg'] }), null);
    assert.equal(pythonImportProblem(NEW_SUBMODULE_FROM_TEST_UNITTEST, { ownModules: ['pkg'] }), null);
    // A top-level name that is missing is a setup problem (the package is not on sys.path) even then.
    assert.notEqual(
      pythonImportProblem(TEST_IMPORTS_MISSING_PYTEST9, { ownModules: ['requests_not_installed'] }),
      null,
    );
  });
});

describe('pythonImportProblem: missing or broken dependencies stay environment problems', () => {
  const environment: [string, string, { words: string; line: string }][] = [
    [
      'a test imports a module that is not installed, pytest',
      TEST_IMPORTS_MISSING_PYTEST9,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'a test imports a module that is not installed, unittest',
      TEST_IMPORTS_MISSING_UNITTEST,
      { words: MODULE, line: "ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'a test imports a module that is not installed, pytest --color=yes',
      TEST_IMPORTS_MISSING_PYTEST9_COLOR,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'the repository own module imports a module that is not installed, pytest --tb=short',
      OWN_MODULE_IMPORTS_MISSING_PYTEST9_WORKSPACE,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'the repository own module imports a module that is not installed, unittest',
      OWN_MODULE_IMPORTS_MISSING_UNITTEST_WORKSPACE,
      { words: MODULE, line: "ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'a test imports pkg.newmod and no frame shows pkg/ is the repository own, pytest -q',
      NEW_SUBMODULE_FROM_TEST_PYTEST9_Q,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'pkg.newmod'" },
    ],
    [
      'a test imports pkg.newmod and no frame shows pkg/ is the repository own, unittest',
      NEW_SUBMODULE_FROM_TEST_UNITTEST,
      { words: MODULE, line: "ModuleNotFoundError: No module named 'pkg.newmod'" },
    ],
    [
      'conftest.py imports a module that is not installed, pytest',
      CONFTEST_IMPORTS_MISSING_PYTEST9,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'conftest.py imports a module that is not installed, pytest -q',
      CONFTEST_IMPORTS_MISSING_PYTEST9_Q,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'a pytest plugin that is not installed',
      MISSING_PLUGIN_PYTEST7_Q,
      { words: MODULE, line: "ModuleNotFoundError: No module named 'pytest_not_installed_plugin'" },
    ],
    [
      'cannot import a name from the standard library or site-packages, pytest -q',
      CANNOT_IMPORT_FROM_STDLIB_AND_SITE_PACKAGES_PYTEST9_Q,
      { words: IMPORT, line: "ImportError while importing test module '/tmp/pyimp/c9/tests/test_std.py'." },
    ],
    [
      'cannot import a name from the standard library or site-packages, unittest',
      CANNOT_IMPORT_FROM_STDLIB_AND_SITE_PACKAGES_UNITTEST,
      { words: IMPORT, line: 'ImportError: Failed to import test module: tests.test_std' },
    ],
    [
      'cannot import a name from dist-packages, pytest 7 -q',
      CANNOT_IMPORT_FROM_DIST_PACKAGES_PYTEST7_Q,
      { words: IMPORT, line: "ImportError while importing test module '/tmp/pyimp/c16/tests/test_tp.py'." },
    ],
    [
      'cannot import a name from a namespace package: (unknown location)',
      UNKNOWN_LOCATION_PYTEST9_Q,
      { words: IMPORT, line: "ImportError while importing test module '/tmp/pyimp/c15/tests/test_ns.py'." },
    ],
    [
      'an installed package raises on import, pytest -q (a ../-relative site-packages frame)',
      BROKEN_DEPENDENCY_PYTEST9_Q,
      {
        words: COLLECT,
        line: '_______________________ ERROR collecting tests/test_b.py _______________________',
      },
    ],
    [
      'an installed package raises on import, unittest',
      BROKEN_DEPENDENCY_UNITTEST,
      { words: IMPORT, line: 'ImportError: Failed to import test module: tests.test_b' },
    ],
    [
      'one file hits the repository circular import, another a missing module',
      MIXED_OWN_AND_MISSING_PYTEST9_Q,
      { words: MODULE, line: "E   ModuleNotFoundError: No module named 'requests_not_installed'" },
    ],
    [
      'a test body imports a missing submodule and no frame shows its package is the repository own',
      MISSING_SUBMODULE_IN_TEST_BODY_PYTEST9_Q,
      { words: MODULE, line: "E       ModuleNotFoundError: No module named 'pkg.gone'" },
    ],
    [
      'with --tb=no only the summary is left: undecidable',
      TB_NO_PYTEST9_Q,
      {
        words: COLLECT,
        line: '!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!',
      },
    ],
  ];
  for (const [name, output, expected] of environment) {
    test(name, () => {
      assert.deepEqual(pythonImportProblem(output), expected);
    });
  }
});

describe('pythonImportProblem: edge cases', () => {
  test('no Python import or collection failure at all', () => {
    assert.equal(pythonImportProblem(''), null);
    assert.equal(pythonImportProblem(ASSERTION_FAILURE_PYTEST9_Q), null);
    assert.equal(pythonImportProblem("Error: Cannot find module 'left-pad'\n"), null);
  });

  test('an own frame elsewhere in the output does not excuse a missing top-level module', () => {
    const output = `${NEW_SUBMODULE_FROM_PACKAGE_PYTEST9_Q}\n${TEST_IMPORTS_MISSING_PYTEST9}`;
    assert.equal(pythonImportProblem(output)?.words, MODULE);
  });

  test('a missing submodule of a package that only site-packages frames name is the environment', () => {
    const output = [
      '______________________ ERROR collecting tests/test_x.py ______________________',
      'tests/test_x.py:1: in <module>',
      '    import google.protobuf',
      '/venv/lib/python3.11/site-packages/google/__init__.py:1: in <module>',
      '    from google.protobuf import x',
      "E   ModuleNotFoundError: No module named 'google.protobuf'",
    ].join('\n');
    assert.equal(pythonImportProblem(output)?.words, MODULE);
  });

  test('a line longer than 4096 characters is not read', () => {
    const output = `${'x'.repeat(5000)} ModuleNotFoundError: No module named 'requests'\n`;
    assert.equal(pythonImportProblem(output), null);
  });

  test('a quoted line is clipped to 200 characters', () => {
    const output = `ModuleNotFoundError: No module named '${'a'.repeat(300)}'\n`;
    const found = pythonImportProblem(output);
    assert.ok(found !== null);
    assert.equal(found.line.length, 200);
    assert.ok(found.line.endsWith('…'));
  });

  test('CRLF line ends are read like LF', () => {
    assert.equal(pythonImportProblem(CIRCULAR_UNITTEST_WORKSPACE.replaceAll('\n', '\r\n')), null);
    assert.equal(pythonImportProblem(TEST_IMPORTS_MISSING_UNITTEST.replaceAll('\n', '\r\n'))?.words, MODULE);
  });

  test('a long hostile output is read in linear time', () => {
    const hostile = [
      'a'.repeat(200_000),
      '_'.repeat(4000),
      `E ${' '.repeat(4000)}`,
      `${'a.'.repeat(2000)}x`,
      `File "${'/'.repeat(4000)}`,
      `${'x/'.repeat(2000)}.py:1`,
      `cannot import name '' from '' ${'('.repeat(2000)}`,
      ...Array.from({ length: 20_000 }, (_, i) =>
        [
          `pkg${i}/a.py:1: in <module>`,
          `E   ImportError: cannot import name 'x' from 'p' (${'a'.repeat(50)}`,
          'Traceback (most recent call last):',
          `ImportError: No module named 'a.${'b'.repeat(40)}`,
          '___ ERROR collecting x ___',
        ].join('\n'),
      ),
    ].join('\n');
    const start = performance.now();
    const found = pythonImportProblem(hostile);
    const took = performance.now() - start;
    assert.equal(found?.words, MODULE);
    assert.ok(took < 2000, `took ${took} ms`);
  });
});
