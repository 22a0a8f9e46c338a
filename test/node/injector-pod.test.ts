import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { AdmissionregistrationV1Api, type V1Pod } from '@kubernetes/client-node';
import { eventually, helmInstall, helmUninstall, uniqueName, type Release } from '../e2e/cluster.js';
import { serviceAddress } from '../e2e/injector-process.js';
import { importArchive } from './containerd.js';
import { buildImage } from './images.js';
import { injectorRecipe } from './injector-image.js';
import { NODE_IP, NODE_NAME } from './network.js';
import { appPod, describePod, forEachNode, podReady, running, statuses } from './node-suite.js';
import { startRelay, type Relay } from './relay.js';

/**
 * The injector itself on the node (issue 36, last part): the chart's own
 * Deployment, unchanged but for two variables, runs as a Pod of an image
 * assembled with the Dockerfile's runtime layout (injector-image.ts), makes
 * its certificate, patches its webhook's caBundle, passes its probes, and
 * injects a Pod that then runs.
 *
 * What a cluster would give it and this node has not: a scheduler (the test
 * binds the Pod), and kube-proxy. Two relays (relay.ts) stand in for the
 * latter: the node's address to the API server (the Pod's
 * KUBERNETES_SERVICE_HOST/PORT, set through the chart's extraEnv: the
 * kubelet's own values name the kubernetes Service's loopback ClusterIP,
 * which in a Pod is the Pod's own loopback), and the webhook Service's
 * ClusterIP to the Pod's IP, so the API server calls it through the chart's
 * own MutatingWebhookConfiguration and checks the certificate the injector
 * made for `<service>.<namespace>.svc`. A `url` to the Pod's IP cannot be
 * used: that certificate names the Service, not the Pod's address.
 */
forEachNode('the injector\'s own Deployment on the node', (suite, version) => {
  let release: Release | undefined;
  const relays: Relay[] = [];
  let injectorPod: V1Pod | undefined;
  before(async () => {
    const { plane, core } = suite();
    await importArchive((await buildImage(await injectorRecipe())).archive);
    const apiPort = Number(new URL(plane.server).port);
    relays.push(await startRelay({ host: NODE_IP, port: apiPort }, () => ({ host: '127.0.0.1', port: apiPort })));
    release = await helmInstall(plane, { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') }, {
      replicaCount: 1,
      extraEnv: [{ name: 'KUBERNETES_SERVICE_HOST', value: NODE_IP }, { name: 'KUBERNETES_SERVICE_PORT', value: String(apiPort) }],
    });
    const namespace = release.namespace;
    // No scheduler: bind the ReplicaSet's Pod to the node, as a scheduler would.
    const pending = await eventually('the Deployment\'s Pod', async () => {
      const pods = await core.listNamespacedPod({ namespace });
      return pods.items.find((pod) => pod.spec?.nodeName === undefined);
    }, 60_000, 200);
    const name = pending.metadata?.name ?? '';
    await core.createNamespacedPodBinding({ name, namespace, body: { metadata: { name }, target: { apiVersion: 'v1', kind: 'Node', name: NODE_NAME } } });
    injectorPod = await eventually(`the injector Pod ${name} Ready`, async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      return podReady(pod) ? pod : undefined;
    }, 90_000, 250).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${describePod(await core.readNamespacedPod({ name, namespace }))}`);
    });
    const podIp = injectorPod.status?.podIP ?? '';
    const service = await serviceAddress(plane, release);
    const targetPort = injectorPod.spec?.containers[0]?.ports?.find((port) => port.name === 'https')?.containerPort ?? 8443;
    relays.push(await startRelay({ host: service.clusterIP, port: service.port }, () => ({ host: podIp, port: targetPort })));
  });
  after(async () => {
    for (const relay of relays) await relay.close();
    if (release !== undefined) await helmUninstall(suite().plane, release).catch(() => undefined);
  });

  it(`runs as the chart deploys it, makes its certificate and injects a Pod that then runs (${version})`, async () => {
    const { plane, core, namespace, createPods, waitPod } = suite();
    assert.ok(release !== undefined && injectorPod !== undefined);
    const container = injectorPod.spec?.containers[0];
    assert.equal(container?.image, 'envoy-injector:0.1.0');
    assert.equal(container?.securityContext?.readOnlyRootFilesystem, true);
    assert.equal(container?.securityContext?.runAsNonRoot, true);
    assert.equal(statuses(injectorPod).get('envoy-injector')?.restartCount, 0, describePod(injectorPod));
    // Cert mode auto: the injector wrote its CA into the chart's webhook configuration.
    const webhookName = release.manifests.find((manifest) => manifest.kind === 'MutatingWebhookConfiguration')?.metadata.name ?? '';
    const admission = plane.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    await eventually('the caBundle patched by the injector Pod', async () => {
      const config = await admission.readMutatingWebhookConfiguration({ name: webhookName });
      return config.webhooks?.every((webhook) => (webhook.clientConfig.caBundle ?? '') !== '') === true ? true : undefined;
    }, 30_000);
    await eventually('a Pod injected by the injector Pod', async () => {
      const pod = await core.createNamespacedPod({ namespace, body: appPod('probe'), dryRun: 'All' });
      return pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined ? true : undefined;
    }, 30_000, 250);
    await createPods([appPod('injected')]);
    const pod = await waitPod('injected', running('envoy', 'app'), 'the injected Pod running with its proxy');
    assert.ok(pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined);
    assert.equal(pod.spec?.initContainers?.find((entry) => entry.name === 'envoy')?.restartPolicy, 'Always', 'a native sidecar: the injector Pod read this node\'s kubelet version');
  });
}, { injector: 'none' });
