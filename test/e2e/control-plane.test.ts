import assert from 'node:assert/strict';
import { it } from 'node:test';
import { AdmissionregistrationV1beta1Api, CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { forEachKubeVersion } from './control-plane.js';

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

  it(version === '1.34' ? 'serves MutatingAdmissionPolicy (admissionregistration.k8s.io/v1beta1)' : 'serves no MutatingAdmissionPolicy', async () => {
    const listed = await plane().kubeConfig.makeApiClient(AdmissionregistrationV1beta1Api).listMutatingAdmissionPolicy().then(
      () => true,
      (error: { code?: number }) => (error.code === 404 ? false : Promise.reject(error)),
    );
    assert.equal(listed, version === '1.34');
  });
});
