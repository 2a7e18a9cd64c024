/**
 * Module hooks for tools/message-path.mjs: every function in a built package (`packages/*\/dist/*.js`)
 * gets a first statement `globalThis.__rddpEnter?.(file)`, so the tool sees the order in which a message
 * enters the source files, not only which ones it touches. Used by that tool only; the packages are not
 * changed on disk.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

let root = '';
export function initialize(data) {
  root = data.root;
}

export async function load(url, context, next) {
  if (!url.startsWith('file://')) return next(url, context);
  const path = fileURLToPath(url);
  const m = /\/(packages\/[^/]+)\/dist\/(.+)\.js$/.exec(path);
  if (!m || !path.startsWith(root) || path.includes('/node_modules/')) return next(url, context);
  const file = `${m[1]}/src/${m[2]}.ts`;
  const source = await readFile(path, 'utf8');
  return { format: 'module', source: instrument(source, file), shortCircuit: true };
}

function instrument(source, file) {
  const sf = ts.createSourceFile(file, source, ts.ScriptTarget.Latest, true, ts.ScriptKind.JS);
  const transformer = (ctx) => {
    const f = ctx.factory;
    const enter = () =>
      f.createExpressionStatement(
        f.createCallChain(
          f.createPropertyAccessExpression(f.createIdentifier('globalThis'), '__rddpEnter'),
          f.createToken(ts.SyntaxKind.QuestionDotToken),
          undefined,
          [f.createStringLiteral(file)],
        ),
      );
    const withEnter = (body) => {
      if (body === undefined) return body;
      if (ts.isBlock(body)) return f.updateBlock(body, [enter(), ...body.statements]);
      return f.createBlock([enter(), f.createReturnStatement(body)], true);
    };
    const visit = (node) => {
      const n = ts.visitEachChild(node, visit, ctx);
      if (ts.isFunctionDeclaration(n) && n.body)
        return f.updateFunctionDeclaration(
          n,
          n.modifiers,
          n.asteriskToken,
          n.name,
          n.typeParameters,
          n.parameters,
          n.type,
          withEnter(n.body),
        );
      if (ts.isFunctionExpression(n))
        return f.updateFunctionExpression(
          n,
          n.modifiers,
          n.asteriskToken,
          n.name,
          n.typeParameters,
          n.parameters,
          n.type,
          withEnter(n.body),
        );
      if (ts.isArrowFunction(n))
        return f.updateArrowFunction(
          n,
          n.modifiers,
          n.typeParameters,
          n.parameters,
          n.type,
          n.equalsGreaterThanToken,
          withEnter(n.body),
        );
      if (ts.isMethodDeclaration(n) && n.body)
        return f.updateMethodDeclaration(
          n,
          n.modifiers,
          n.asteriskToken,
          n.name,
          n.questionToken,
          n.typeParameters,
          n.parameters,
          n.type,
          withEnter(n.body),
        );
      if (ts.isGetAccessorDeclaration(n) && n.body)
        return f.updateGetAccessorDeclaration(n, n.modifiers, n.name, n.parameters, n.type, withEnter(n.body));
      if (ts.isSetAccessorDeclaration(n) && n.body)
        return f.updateSetAccessorDeclaration(n, n.modifiers, n.name, n.parameters, withEnter(n.body));
      // A constructor of a derived class is left alone (nothing may run before its super() call).
      if (ts.isConstructorDeclaration(n) && n.body && !n.parent?.heritageClauses?.length)
        return f.updateConstructorDeclaration(n, n.modifiers, n.parameters, withEnter(n.body));
      return n;
    };
    return (node) => ts.visitNode(node, visit);
  };
  const out = ts.transform(sf, [transformer]);
  const text = ts.createPrinter().printFile(out.transformed[0]);
  out.dispose();
  return text;
}
