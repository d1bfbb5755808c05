import type { ElementDefinition, Resource, StructureDefinition } from '@medplum/fhirtypes';
import { compiledFhirPath, evalFhirPathTyped, memberValues, toTypedValue, type TypedValue } from '../../server-lib/medplum';
import { ruleViolation, type Finding } from './finding';
import { checkRequiredBinding } from './required-binding';

/**
 * Evaluates the differential of one of our StructureDefinitions against a resource. The
 * differential vocabulary understood here is deliberately small, one rule per element property:
 *
 *   min / max        cardinality of the element within each instance of its parent
 *   constraint[]     FHIRPath invariants, evaluated on each instance of the element
 *   binding          strength `required` with a value set we can expand
 *
 * Slices are written as constraints (e.g. "exactly one Fachrichtung coding"), so elements with a
 * sliceName are not part of the vocabulary. The base definition itself is checked by medplum.
 * Constraints select extensions with `extension.where(url = ...)`: medplum's `extension(url)`
 * returns only the first match, which would hide a repeated extension from a `count()`.
 */
export function evaluateDifferential(sd: StructureDefinition, resource: Resource): Finding[] {
  const root = toTypedValue(resource);
  const findings: Finding[] = [];
  for (const element of sd.differential?.element ?? []) {
    if (element.sliceName) continue;
    const steps = element.path.split('.').slice(1);
    checkCardinality(element, root, steps, findings);
    for (const node of nodesAt(root, steps)) {
      checkConstraints(sd, element, node, root, findings);
      if (element.binding?.strength === 'required' && element.binding.valueSet) {
        const f = checkRequiredBinding(element.binding.valueSet, node, expression(resource, node));
        if (f) findings.push(f);
      }
    }
  }
  return findings;
}

type Node = TypedValue & { path?: string };

function nodesAt(root: Node, steps: string[]): Node[] {
  let nodes: Node[] = [root];
  for (const step of steps) nodes = nodes.flatMap((n) => children(n, step));
  return nodes;
}

function children(node: Node, step: string): Node[] {
  // `value[x]` in an ElementDefinition path is `value` in FHIRPath.
  return memberValues([node], step.replace('[x]', ''));
}

// Every write is validated: each expression of the (static) profiles is parsed once.
const parsed = compiledFhirPath;

function checkCardinality(element: ElementDefinition, root: Node, steps: string[], findings: Finding[]): void {
  if (steps.length === 0) return;
  const min = element.min ?? 0;
  const max = element.max === undefined || element.max === '*' ? Infinity : Number(element.max);
  if (min === 0 && max === Infinity) return;
  const last = steps[steps.length - 1];
  const resource = root.value as Resource;
  for (const parent of nodesAt(root, steps.slice(0, -1))) {
    const count = children(parent, last).length;
    const where = parent === root ? resource.resourceType : expression(resource, parent);
    const at = `${where}.${last}`;
    if (count < min) {
      findings.push(ruleViolation('required', at, `${element.path}: minimum cardinality is ${min}, found ${count}`));
    } else if (count > max) {
      findings.push(ruleViolation('business-rule', at, `${element.path}: maximum cardinality is ${max}, found ${count}`));
    }
  }
}

function checkConstraints(
  sd: StructureDefinition,
  element: ElementDefinition,
  node: Node,
  root: Node,
  findings: Finding[],
): void {
  for (const c of element.constraint ?? []) {
    if (!c.expression) continue;
    const resource = root.value as Resource;
    const at = node === root ? resource.resourceType : expression(resource, node);
    let holds: boolean;
    try {
      const result = evalFhirPathTyped(parsed(c.expression), [node], { '%resource': root, '%rootResource': root });
      holds = result.length === 1 && result[0].value === true;
    } catch (err) {
      findings.push(ruleViolation('invariant', at, `${c.key}: cannot evaluate (${(err as Error).message})`));
      continue;
    }
    if (!holds) {
      const severity = c.severity === 'warning' ? 'warning' : 'error';
      findings.push(ruleViolation('invariant', at, `${c.key} (${sd.name}): ${c.human}`, severity));
    }
  }
}

function expression(resource: Resource, node: Node): string {
  return node.path ? `${resource.resourceType}.${node.path}` : resource.resourceType;
}
