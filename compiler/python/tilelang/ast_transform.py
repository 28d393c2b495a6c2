"""Re-parse a tile program's source and rewrite Python control flow so that
it works on device values.

The rewritten function is run once (traced). Where a condition, loop or
assignment involves a device value it records IR; where it only involves
Python values (shapes, tile sizes, flags) it behaves as ordinary Python:

  if c: A else: B        -> device `if`/`else` when c is a device value
  a if c else b          -> `select(c, a, b)` when c is a device value
  a and b, a or b, not a -> `&&`, `||`, `!` on device values
  x < y < z              -> (x < y) and (y < z)
  for v in ITER          -> IR loop for T.serial/T.Parallel/T.Pipelined/T.unroll/range
  with X as names        -> names for T.Kernel's block indices
  x = value              -> store when x is a T.alloc_var, `let x` for a device expression

Line numbers are kept, so a traced statement's frame points at the user's line.
"""

import ast
import inspect
import textwrap
import types

from .errors import TileLangSyntaxError, display_path

HELPER = "__tl"


def _call(name, args, node):
    fn = ast.Attribute(value=ast.Name(id=HELPER, ctx=ast.Load()), attr=name, ctx=ast.Load())
    return ast.copy_location(ast.Call(func=fn, args=args, keywords=[]), node)


def _lambda(body, node):
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                         kwarg=None, defaults=[])
    return ast.copy_location(ast.Lambda(args=args, body=body), node)


def _target_names(target):
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [e.id if isinstance(e, ast.Name) else None for e in target.elts]
    return [None]


class _Rewriter(ast.NodeTransformer):
    def __init__(self):
        self.counter = 0
        self.depth = 0

    def visit_FunctionDef(self, node):
        # Only the traced function itself is rewritten; nested defs stay Python.
        self.depth += 1
        if self.depth > 1:
            self.depth -= 1
            return node
        node.body = self._stmts(node.body)
        self.depth -= 1
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        return node

    def _stmts(self, stmts):
        out = []
        for s in stmts:
            r = self.visit(s)
            if isinstance(r, list):
                out.extend(r)
            elif r is not None:
                out.append(r)
        return out

    def visit_If(self, node):
        test = self.visit(node.test)
        body = self._stmts(node.body)
        orelse = self._stmts(node.orelse)
        self.counter += 1
        tmp = f"__tl_cond{self.counter}"
        assign = ast.copy_location(ast.Assign(targets=[ast.Name(id=tmp, ctx=ast.Store())], value=test), node)
        cond = ast.Name(id=tmp, ctx=ast.Load())
        device = [ast.copy_location(ast.With(items=[ast.withitem(
            context_expr=_call("if_then", [cond], node), optional_vars=None)], body=body), node)]
        if orelse:
            device.append(ast.copy_location(ast.With(items=[ast.withitem(
                context_expr=_call("else_", [], node), optional_vars=None)], body=orelse), node))
        # The Python branch needs its own copies of the statement lists.
        import copy
        py = ast.copy_location(ast.If(test=ast.Name(id=tmp, ctx=ast.Load()), body=copy.deepcopy(body),
                                      orelse=copy.deepcopy(orelse)), node)
        dispatch = ast.copy_location(ast.If(test=_call("is_device", [ast.Name(id=tmp, ctx=ast.Load())], node),
                                            body=device, orelse=[py]), node)
        return [assign, dispatch]

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _call("ifexp", [node.test, _lambda(node.body, node), _lambda(node.orelse, node)], node)

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        name = "and_" if isinstance(node.op, ast.And) else "or_"
        return _call(name, [_lambda(v, v) for v in node.values], node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _call("not_", [node.operand], node)
        return node

    def visit_Compare(self, node):
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(_lambda(ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), node), node))
            left = right
        return _call("and_", parts, node)

    def visit_For(self, node):
        node.iter = self.visit(node.iter)
        names = ast.Tuple(elts=[ast.Constant(value=n) for n in _target_names(node.target)], ctx=ast.Load())
        node.iter = _call("for_", [node.iter, names], node)
        node.body = self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def visit_While(self, node):
        node.test = _call("while_cond", [self.visit(node.test)], node.test)
        node.body = self._stmts(node.body)
        node.orelse = self._stmts(node.orelse)
        return node

    def visit_With(self, node):
        for item in node.items:
            item.context_expr = self.visit(item.context_expr)
            if item.optional_vars is not None:
                names = ast.Tuple(elts=[ast.Constant(value=n) for n in _target_names(item.optional_vars)],
                                  ctx=ast.Load())
                item.context_expr = _call("with_", [item.context_expr, names], node)
        node.body = self._stmts(node.body)
        return node

    def visit_Assign(self, node):
        node.value = self.visit(node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            prev = _call("prev", [_lambda(ast.Name(id=name, ctx=ast.Load()), node)], node)
            node.value = _call("assign", [ast.Constant(value=name), node.value, prev], node)
        else:
            node.targets = [self.visit(t) for t in node.targets]
        return node

    def visit_AnnAssign(self, node):
        # `x: T.float32 = v` binds like `x = v`, converted to the annotated dtype.
        if not isinstance(node.target, ast.Name):
            return node
        if node.value is None:
            # Eager style declares a kernel parameter: `A: T.Tensor((M, K), dtype)`.
            name = node.target.id
            prev = _call("prev", [_lambda(ast.Name(id=name, ctx=ast.Load()), node)], node)
            value = _call("declare", [ast.Constant(value=name), node.annotation, prev], node)
            return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=value), node)
        name = node.target.id
        value = _call("annotated", [self.visit(node.value), node.annotation], node)
        prev = _call("prev", [_lambda(ast.Name(id=name, ctx=ast.Load()), node)], node)
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                            value=_call("assign", [ast.Constant(value=name), value, prev], node)),
                                 node)

    def visit_Break(self, node):
        return [ast.copy_location(ast.Expr(value=_call("check_jump", [ast.Constant(value="break")], node)), node),
                node]

    def visit_Continue(self, node):
        return [ast.copy_location(ast.Expr(value=_call("check_jump", [ast.Constant(value="continue")], node)), node),
                node]

    def visit_Return(self, node):
        if node.value is not None:
            node.value = self.visit(node.value)
        return [ast.copy_location(ast.Expr(value=_call("check_jump", [ast.Constant(value="return")], node)), node),
                node]

    def visit_AugAssign(self, node):
        node.value = self.visit(node.value)
        if isinstance(node.target, ast.Name):
            name = node.target.id
            cur = ast.Name(id=name, ctx=ast.Load())
            value = ast.copy_location(ast.BinOp(left=cur, op=node.op, right=node.value), node)
            prev = _call("prev", [_lambda(ast.Name(id=name, ctx=ast.Load()), node)], node)
            return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())],
                                                value=_call("assign", [ast.Constant(value=name), value, prev], node)),
                                     node)
        node.target = self.visit(node.target)
        return node


def _find_def(tree, name, lineno):
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            if best is None or abs(node.lineno - lineno) < abs(best.lineno - lineno):
                best = node
    return best


_CACHE = {}


def transformed(func):
    """The rewritten code of func, parsed once per code object."""
    t = _CACHE.get(func.__code__)
    if t is None:
        t = _CACHE[func.__code__] = Transformed(func)
    return t


class Transformed:
    """A function's rewritten code, re-instantiated with current closure values."""

    def __init__(self, func):
        self.func = func
        code = func.__code__
        self.filename = code.co_filename
        try:
            lines, first = inspect.getsourcelines(func)
        except (OSError, TypeError) as e:
            raise TileLangSyntaxError(f"cannot read the source of {func.__name__} ({e}); "
                                      "tile programs must live in a .py file", display_path(self.filename),
                                      code.co_firstlineno) from None
        src = textwrap.dedent("".join(lines))
        tree = ast.parse(src)
        ast.increment_lineno(tree, first - 1)
        fdef = _find_def(tree, func.__name__, code.co_firstlineno)
        fdef.decorator_list = []
        # Annotations and defaults were evaluated with the original def (in the
        # factory's scope, which the rewritten def cannot see): drop them here and
        # copy the evaluated defaults over in instantiate().
        a = fdef.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
            if arg is not None:
                arg.annotation = None
        fdef.returns = None
        a.defaults = [ast.Constant(value=None) for _ in a.defaults]
        a.kw_defaults = [None if d is None else ast.Constant(value=None) for d in a.kw_defaults]
        self.def_line = fdef.lineno
        fdef = _Rewriter().visit(fdef)
        freevars = list(code.co_freevars)
        maker = ast.FunctionDef(
            name="__tl_make",
            args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in [HELPER] + freevars],
                               vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
            body=[fdef, ast.Return(value=ast.Name(id=func.__name__, ctx=ast.Load()))],
            decorator_list=[], returns=None, type_comment=None)
        ast.copy_location(maker, fdef)
        module = ast.fix_missing_locations(ast.Module(body=[maker], type_ignores=[]))
        compiled = compile(module, self.filename, "exec")
        make_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
        # Run with the module's own (live) globals, without adding names to them.
        self.maker = types.FunctionType(make_code, func.__globals__)
        self.freevars = freevars

    def instantiate(self, helpers, func=None):
        func = func or self.func  # same code, possibly other closure cells
        cells = func.__closure__ or ()
        values = []
        for cell in cells:
            try:
                values.append(cell.cell_contents)
            except ValueError:
                values.append(None)  # a closure name not bound yet
        fn = self.maker(helpers, *values)
        fn.__defaults__ = func.__defaults__
        fn.__kwdefaults__ = func.__kwdefaults__
        return fn


def eager_style(func):
    """Whether func is written in upstream's eager style (parameters declared by
    `A: T.Tensor(...)` statements, T.const, T.empty) rather than returning a prim_func."""
    try:
        lines, _ = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return False
    fdef = _find_def(ast.parse(textwrap.dedent("".join(lines))), func.__name__, 0)
    if fdef is None:
        return False
    for node in ast.walk(fdef):
        if node is not fdef and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any("prim_func" in ast.unparse(d) for d in node.decorator_list):
                return False
    for node in fdef.body:
        if isinstance(node, ast.AnnAssign) and node.value is None:
            return True
    src = ast.unparse(fdef)
    return ".const(" in src or ".empty(" in src


def declared_names(func):
    """Names declared by `NAME: annotation` statements (eager-style parameters), in order."""
    lines, _ = inspect.getsourcelines(func)
    fdef = _find_def(ast.parse(textwrap.dedent("".join(lines))), func.__name__, 0)
    return [n.target.id for n in ast.walk(fdef)
            if isinstance(n, ast.AnnAssign) and n.value is None and isinstance(n.target, ast.Name)]
