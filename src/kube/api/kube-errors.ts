import { ApiException } from '@kubernetes/client-node';
import { KubeRequestError } from './kube-json.js';

/** The HTTP status of a failed API call, when there was one. */
export function kubeErrorStatus(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code;
  const status = (error as { statusCode?: unknown } | undefined)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/**
 * One line for a log: `HTTP 404: namespaces "x" not found`. client-node's
 * ApiException messages carry the whole body and headers on many lines.
 */
export function describeKubeError(error: unknown): string {
  if (error instanceof ApiException) {
    const message = kubeErrorStatusBody(error)?.message;
    return `HTTP ${error.code}${typeof message === 'string' && message !== '' ? `: ${message}` : ''}`;
  }
  const status = kubeErrorStatus(error);
  const text = error instanceof Error ? error.message : String(error);
  return `${status === undefined ? '' : `HTTP ${status}: `}${text.split('\n')[0] ?? ''}`;
}

/**
 * The error to log under `err`: one line of message (not the whole response
 * body client-node puts there), the HTTP status as `status`, the stack kept.
 */
export function kubeErrorForLog(error: unknown): Error {
  const logged = new Error(describeKubeError(error));
  logged.name = error instanceof Error ? error.name : 'Error';
  if (error instanceof Error && error.stack !== undefined) logged.stack = `${logged.name}: ${logged.message}\n${error.stack.split('\n').filter((line) => line.trimStart().startsWith('at ')).join('\n')}`;
  return Object.assign(logged, { status: kubeErrorStatus(error) });
}

/** The `Status` object a failed API call answered with, when there was one. */
export function kubeErrorStatusBody(error: unknown): { message?: unknown; metadata?: { continue?: unknown } } | undefined {
  if (error instanceof KubeRequestError) return typeof error.body === 'object' && error.body !== null ? error.body : undefined;
  if (!(error instanceof ApiException)) return undefined;
  try {
    const body: unknown = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
    return typeof body === 'object' && body !== null ? body : undefined;
  } catch {
    return undefined; // not a Status body
  }
}
