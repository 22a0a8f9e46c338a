import assert from 'node:assert/strict';
import { it } from 'node:test';
import { CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { kubeCall } from './policy-parity.js';

/** What the scenarios rely on from the harness itself. */
forEachKubeVersion('the control plane harness', (plane, version) => {
  it(`is Kubernetes ${version}`, async () => {
    const info = await plane().kubeConfig.makeApiClient(VersionApi).getCode();
    assert.equal(`${info.major}.${info.minor.replace(/\D+$/, '')}`, version);
  });

  it('allocates ClusterIPs on loopback only', async () => {
    assert.match(plane().serviceRange, /^127\.\d+\.\d+\.0\/24$/);
    const service = await plane().kubeConfig.makeApiClient(CoreV1Api).readNamespacedService({ name: 'kubernetes', namespace: 'default' });
    assert.match(service.spec?.clusterIP ?? '', /^127\./);
  });

  it('mints ServiceAccount tokens that RBAC judges as that ServiceAccount, not as admin', async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(await plane().serviceAccountKubeconfig('default', 'default'));
    const refused = await kubeConfig.makeApiClient(CoreV1Api).listSecretForAllNamespaces().then(
      () => undefined,
      (error: { code?: number; body?: string }) => error,
    );
    assert.equal(refused?.code, 403);
    assert.match(String(refused?.body), /system:serviceaccount:default:default/);
  });

  const served = servedPolicyApiVersion(version);
  it(served === undefined ? 'serves no MutatingAdmissionPolicy' : `serves MutatingAdmissionPolicy through admissionregistration.k8s.io/${served} only`, async () => {
    const listed: string[] = [];
    for (const candidate of ['v1', 'v1beta1']) {
      const response = await kubeCall(plane(), 'GET', `/apis/admissionregistration.k8s.io/${candidate}/mutatingadmissionpolicies`);
      if (response.status === 200) listed.push(candidate);
      else assert.equal(response.status, 404, `${candidate}: ${response.status}`);
    }
    assert.deepEqual(listed, served === undefined ? [] : [served]);
  });
});
