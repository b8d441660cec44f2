"""ddppo.user_code: the working directory first on sys.path, and registries of names validated like choices."""

from __future__ import annotations

import importlib
import os
import sys
import types

import pytest

from ddppo.config import load_config
from ddppo.errors import ConfigError
from ddppo.user_code import POLICIES, Registry, import_user_module, workdir_first


def fresh() -> Registry:
    return Registry("policy", "policy.architecture", ("ddppo",), "@register_policy(NAME)", home="ddppo.model.build")


def test_registered_names_are_choices_in_order():
    reg = fresh()

    @reg.register("mine")
    def build():
        return "built"

    assert list(reg) == ["ddppo", "mine"] and "mine" in reg and "other" not in reg
    assert reg.get("mine")() == "built"
    assert reg.register("mine")(build) is build  # the same builder again (a module imported twice) is fine
    with pytest.raises(ValueError, match="registered already"):
        reg.register("mine")(lambda: None)
    for bad in ("", "a:b", " x"):
        with pytest.raises(ValueError, match="non-empty string"):
            reg.register(bad)


def test_problems_name_the_key_the_registered_names_and_the_fix():
    reg = fresh()
    assert reg.problem("ddppo") is None
    problem = reg.problem("nope", "policy.x")
    assert problem.startswith("policy.x='nope': must be one of ddppo") and "MODULE:NAME" in problem
    assert "must be a name" in reg.problem(3)
    assert "does not register 'nope'" in reg.problem("json:nope")
    assert "no module named 'no_such_module_xyz' in the working directory" in reg.problem("no_such_module_xyz:a")
    for value in (":a", ".rel:a", "!!python/object:os.system", "a b:c"):
        assert "is not a module name" in reg.problem(value), value


def test_module_name_imports_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "my_arch_mod.py").write_text(
        "from ddppo.user_code import POLICIES\n"
        "from ddppo.model.build import ddppo_policy\n"
        "POLICIES.register('my_arch')(ddppo_policy)\n")
    monkeypatch.chdir(tmp_path)
    importlib.import_module(POLICIES.home)  # the built-ins registered in the registry itself, not only in its copy
    monkeypatch.setattr(POLICIES, "_builders", dict(POLICIES._builders))  # registered for this test only
    monkeypatch.setattr(POLICIES, "_extra", list(POLICIES._extra))
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.curdir, str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_arch_mod", raising=False)
    cfg = load_config("gridnav", ["policy.architecture=my_arch_mod:my_arch"])
    assert cfg.policy.architecture == "my_arch_mod:my_arch" and sys.path[0] == str(tmp_path)
    with pytest.raises(ConfigError, match="policy.vector_encoder='my_arch_mod:my_arch': module 'my_arch_mod' "
                                          "does not register 'my_arch'; must be one of mlp"):
        load_config("gridnav", ["policy.vector_encoder=my_arch_mod:my_arch"])


def test_workdir_first_once_and_import_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["/elsewhere"])
    workdir_first()
    workdir_first()
    assert sys.path == [str(tmp_path), "/elsewhere"]
    (tmp_path / "broken_user_mod.py").write_text("import no_such_dependency_xyz\n")
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_xyz"):  # its own error, not ours
        import_user_module("broken_user_mod")
    (tmp_path / "raising_user_mod.py").write_text("raise RuntimeError('not today')\n")
    assert fresh().problem("raising_user_mod:x") == ("policy.architecture='raising_user_mod:x': importing "
                                                     "'raising_user_mod' failed: RuntimeError: not today")



def test_a_built_in_builder_is_found_by_importing_the_registrys_home(tmp_path, monkeypatch):
    """A lower layer asks for a built-in builder its own layer never imports (the config checks asking for an
    advantage estimator's rules): the registry imports its home, the module that registers the built-in ones."""
    reg = Registry("policy", "policy.architecture", ("ddppo",), "@register_policy(NAME)", home="home_builtins_mod")
    holder = types.ModuleType("registry_holder_mod")
    holder.REG = reg
    monkeypatch.setitem(sys.modules, "registry_holder_mod", holder)
    monkeypatch.delitem(sys.modules, "home_builtins_mod", raising=False)
    monkeypatch.delitem(sys.modules, "empty_home_mod", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "home_builtins_mod.py").write_text(
        "from registry_holder_mod import REG\nREG.register('ddppo')(lambda: 'built in')\n")
    (tmp_path / "empty_home_mod.py").write_text("")
    assert reg.problem("ddppo") is None and "home_builtins_mod" not in sys.modules  # a name alone imports nothing
    assert reg.get("ddppo")() == "built in" and "home_builtins_mod" in sys.modules
    lost = Registry("policy", "policy.architecture", ("ddppo",), "@register_policy(NAME)", home="empty_home_mod")
    with pytest.raises(ValueError, match="the built-in policy 'ddppo' is not registered by empty_home_mod"):
        lost.get("ddppo")


def test_image_and_vector_encoders_have_their_own_choices_and_yours_is_a_choice_of_both(monkeypatch):
    from ddppo.model.build import register_encoder
    from ddppo.user_code import ENCODERS, VECTOR_ENCODERS

    with pytest.raises(ConfigError, match=r"policy.image_encoder='mlp': must be one of cnn, nature, grid, resnet \("):
        load_config(None, ["policy.image_encoder=mlp"])
    with pytest.raises(ConfigError, match=r"policy.vector_encoder='cnn': must be one of mlp \("):
        load_config(None, ["policy.vector_encoder=cnn"])
    for registry in (ENCODERS, VECTOR_ENCODERS):  # registered for this test only
        monkeypatch.setattr(registry, "_builders", dict(registry._builders))
        monkeypatch.setattr(registry, "_extra", list(registry._extra))
    name = "test_user_code_both_kinds"
    register_encoder(name)(lambda space, cfg: None)
    assert name in ENCODERS and name in VECTOR_ENCODERS
    assert ENCODERS.get(name) is VECTOR_ENCODERS.get(name)
