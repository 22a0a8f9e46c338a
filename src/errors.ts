/**
 * One base class with a stable `code`, a subclass per kind: callers and tests
 * match on codes, never on message text.
 */
export class InjectorError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A sidecar template (ConfigMap data or file) that Kubernetes would not accept. */
export class TemplateError extends InjectorError {
  /** Every problem found, each `template: path: problem`. */
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super('EI_TEMPLATE_INVALID', problems.join('; '));
    this.problems = problems;
  }
}

/** A manifest given to `inject`/`explain` that is not YAML of Kubernetes objects. */
export class ManifestError extends InjectorError {
  constructor(message: string, options?: ErrorOptions) {
    super('EI_MANIFEST_INVALID', message, options);
  }
}

/** A JSON Patch that does not apply to its Pod: a fault of the merge, never of the input. */
export class PatchError extends InjectorError {
  constructor(message: string, options?: ErrorOptions) {
    super('EI_PATCH_REJECTED', message, options);
  }
}

/** Templates that compile to a MutatingAdmissionPolicy the API server would refuse (a CEL limit). */
export class PolicyLimitError extends InjectorError {
  /** Every limit passed, each naming the template, the expression and the limit. */
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super('EI_POLICY_LIMIT', problems.join('; '));
    this.problems = problems;
  }
}

/** Bad command-line or environment settings. */
export class UsageError extends InjectorError {
  constructor(message: string) {
    super('EI_USAGE', message);
  }
}

/** Certificate or key material that cannot be used. */
export class CertificateError extends InjectorError {
  constructor(message: string, options?: ErrorOptions) {
    super('EI_CERTIFICATE_INVALID', message, options);
  }
}

/** The labels of a Pod's namespace cannot be known (no synced watch, the direct read failed). */
export class NamespaceLabelsUnknownError extends InjectorError {
  constructor(message: string, options?: ErrorOptions) {
    super('EI_NAMESPACE_LABELS_UNKNOWN', message, options);
  }
}

/** A Kubernetes API call that failed (unreachable, forbidden, not found). */
export class ClusterError extends InjectorError {
  constructor(message: string, options?: ErrorOptions) {
    super('EI_CLUSTER_REQUEST', message, options);
  }
}
