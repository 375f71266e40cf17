{{- define "txnwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "txnwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "txnwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "txnwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "txnwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "txnwatch.labels" -}}
helm.sh/chart: {{ include "txnwatch.chart" . }}
{{ include "txnwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: txnwatch
{{- end }}

{{- define "txnwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "txnwatch.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "txnwatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "txnwatch.secretName" -}}
{{- default (include "txnwatch.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* true when the database is external (PostgreSQL): migrations run as a hook Job */}}
{{- define "txnwatch.externalDatabase" -}}
{{- if or .Values.secrets.databaseUrl .Values.secrets.existingSecret }}true{{- end }}
{{- end }}

{{/* "true" for a cluster (the context) that logs in with a password: SASL, and not GSSAPI, OAUTHBEARER or
     AWS_MSK_IAM (a SASL cluster without a mechanism counts, so that its missing password is named too). */}}
{{- define "txnwatch.usesPassword" -}}
{{- if and (hasPrefix "SASL" (default "PLAINTEXT" .security_protocol)) (not (has (default "" .sasl_mechanism) (list "GSSAPI" "OAUTHBEARER" "AWS_MSK_IAM"))) }}true{{- end }}
{{- end }}

{{/* Clusters that authenticate with a SASL password */}}
{{- define "txnwatch.hasSasl" -}}
{{- range .Values.config.clusters }}{{- include "txnwatch.usesPassword" . }}{{- end }}
{{- end }}

{{/* Clusters that authenticate with Kerberos (GSSAPI): a keytab each, one krb5.conf */}}
{{- define "txnwatch.hasKerberos" -}}
{{- range .Values.config.clusters }}{{- if eq (default "" .sasl_mechanism) "GSSAPI" }}true{{- end }}{{- end }}
{{- end }}

{{- define "txnwatch.kerberosDir" -}}
/etc/txnwatch/kerberos
{{- end }}

{{/* The txnwatch config file (non-secret part). */}}
{{- define "txnwatch.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $api := merge (dict "host" "0.0.0.0" "port" 8080 "trusted_proxies" .Values.trustedProxies) (omit (default (dict) $cfg.api) "host" "port" "read_token" "admin_token" "trusted_proxies") }}
{{- $_ := set $cfg "api" $api }}
{{- $metrics := merge (dict "port" 8081) (omit (default (dict) $cfg.metrics) "port") }}
{{- $_ := set $cfg "metrics" $metrics }}
{{- $_ := set $cfg "database_url" "sqlite:////var/lib/txnwatch/txnwatch.db" }}
{{- $retention := default (dict) $cfg.retention }}
{{- if not (hasKey $retention "archive_dir") }}
{{- $_ := set $retention "archive_dir" "/var/lib/txnwatch/archive" }}
{{- end }}
{{- $_ := set $cfg "retention" $retention }}
{{- $pd := omit (default (dict) $cfg.pagerduty) "routing_key" }}
{{- $_ := set $cfg "pagerduty" $pd }}
{{- $clusters := list }}
{{- range $cfg.clusters }}
{{- $c := omit . "sasl_password" }}
{{- if include "txnwatch.usesPassword" . }}
{{- /* The password is a file of the mounted Secret: its bytes reach the SASL login unescaped. */}}
{{- $_ := set $c "sasl_password_file" (printf "%s/sasl-password-%s" (include "txnwatch.secretsDir" $) .name) }}
{{- end }}
{{- if eq (default "" .sasl_mechanism) "GSSAPI" }}
{{- /* The cluster's keytab, a key of kerberos.keytabSecret mounted read-only. */}}
{{- $_ := set $c "sasl_kerberos_keytab" (printf "%s/keytab-%s" (include "txnwatch.kerberosDir" $) .name) }}
{{- end }}
{{- $clusters = append $clusters $c }}
{{- end }}
{{- $_ := set $cfg "clusters" $clusters }}
{{- toYaml $cfg }}
{{- end }}

{{- define "txnwatch.secretsDir" -}}
/etc/txnwatch/secrets
{{- end }}

{{/* Environment shared by the daemon, the migration init container and the pipeline. */}}
{{- define "txnwatch.env" -}}
- name: TXNWATCH_CONFIG
  value: /etc/txnwatch/config.yaml
{{- $secret := include "txnwatch.secretName" . }}
{{- $existing := .Values.secrets.existingSecret }}
{{- if or $existing .Values.secrets.databaseUrl }}
- name: TXNWATCH_DATABASE_URL
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: database-url}
{{- end }}
{{- if or $existing .Values.secrets.pagerdutyRoutingKey }}
- name: TXNWATCH_PAGERDUTY__ROUTING_KEY
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: pagerduty-routing-key, optional: {{ not .Values.secrets.pagerdutyRoutingKey }}}
{{- end }}
{{- if or $existing .Values.secrets.apiReadToken }}
- name: TXNWATCH_API__READ_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: api-read-token, optional: {{ not .Values.secrets.apiReadToken }}}
{{- end }}
{{- if or $existing .Values.secrets.apiAdminToken }}
- name: TXNWATCH_API__ADMIN_TOKEN
  valueFrom:
    secretKeyRef: {name: {{ $secret }}, key: api-admin-token, optional: {{ not .Values.secrets.apiAdminToken }}}
{{- end }}
{{- if include "txnwatch.hasKerberos" . }}
- name: KRB5_CONFIG
  value: {{ include "txnwatch.kerberosDir" . }}/krb5.conf
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "txnwatch.checks" -}}
{{- $c := .Values.config }}
{{- if hasKey $c "database_url" }}
{{- fail "config.database_url must not be set: put the database URL in secrets.databaseUrl (or secrets.existingSecret, key database-url); it holds a password" }}
{{- end }}
{{- range $k := list "read_token" "admin_token" "host" "port" }}
{{- if hasKey (default (dict) $c.api) $k }}
{{- fail (printf "config.api.%s must not be set: the chart sets host/port (0.0.0.0:8080) and tokens come from secrets.apiReadToken / secrets.apiAdminToken" $k) }}
{{- end }}
{{- end }}
{{- if hasKey (default (dict) $c.metrics) "port" }}
{{- fail "config.metrics.port must not be set: the chart serves /metrics on the container's port 8081 (the metrics port, service.metricsPort)" }}
{{- end }}
{{- if hasKey (default (dict) $c.api) "trusted_proxies" }}
{{- fail "config.api.trusted_proxies must not be set: use trustedProxies (the addresses or networks of your Ingress controller's pods)" }}
{{- end }}
{{- range $k, $v := dict "apiReadToken" .Values.secrets.apiReadToken "apiAdminToken" .Values.secrets.apiAdminToken }}
{{- if and $v (not (regexMatch "^[!-~]+$" $v)) }}
{{- fail (printf "secrets.%s must be visible ASCII only (letters, digits, punctuation; no spaces, newlines or other characters)" $k) }}
{{- end }}
{{- end }}
{{- if hasKey (default (dict) $c.pagerduty) "routing_key" }}
{{- fail "config.pagerduty.routing_key must not be set: put it in secrets.pagerdutyRoutingKey (or secrets.existingSecret, key pagerduty-routing-key)" }}
{{- end }}
{{- range $c.clusters }}
{{- if hasKey . "sasl_password" }}
{{- fail (printf "config.clusters[%s].sasl_password must not be set: put it in secrets.saslPasswords.%s (or secrets.existingSecret, key sasl-password-%s)" .name .name .name) }}
{{- end }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not (include "txnwatch.externalDatabase" .)) }}
{{- fail "replicaCount > 1 needs PostgreSQL: set secrets.databaseUrl or secrets.existingSecret (SQLite is single-instance)" }}
{{- end }}
{{- if and .Values.pipeline.enabled (not .Values.archive.existingClaim) (not (contains "://" (toString (default "" (default (dict) .Values.config.retention).archive_dir)))) }}
{{- fail "pipeline.enabled needs a shared history archive: set archive.existingClaim or a URI in config.retention.archive_dir" }}
{{- end }}
{{- if and .Values.pipeline.enabled (include "txnwatch.pipelineK8s" .) (not (hasKey .Values.pipeline.spark.conf "spark.kubernetes.container.image")) }}
{{- fail "pipeline.spark.master k8s://… needs pipeline.spark.conf.\"spark.kubernetes.container.image\": the executors' image, a Spark image of the same version as the pipeline image's PySpark" }}
{{- end }}
{{- if and .Values.pipeline.enabled (include "txnwatch.pipelineK8s" .) (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) }}
{{- fail "pipeline.spark.master k8s://… needs a service account the driver can create executor pods with: serviceAccount.create or serviceAccount.name" }}
{{- end }}
{{- if and .Values.config.pagerduty.enabled (not .Values.secrets.pagerdutyRoutingKey) (not .Values.secrets.existingSecret) }}
{{- fail "config.pagerduty.enabled needs secrets.pagerdutyRoutingKey or secrets.existingSecret with key pagerduty-routing-key" }}
{{- end }}
{{- range .Values.config.clusters }}
{{- if and (include "txnwatch.usesPassword" .) (not $.Values.secrets.existingSecret) (not (hasKey $.Values.secrets.saslPasswords .name)) }}
{{- fail (printf "cluster %s uses %s: set secrets.saslPasswords.%s (or secrets.existingSecret with key sasl-password-%s)" .name .security_protocol .name .name) }}
{{- end }}
{{- if eq (default "" .sasl_mechanism) "GSSAPI" }}
{{- if hasKey . "sasl_kerberos_keytab" }}
{{- fail (printf "config.clusters[%s].sasl_kerberos_keytab must not be set: the chart mounts the key keytab-%s of kerberos.keytabSecret there" .name .name) }}
{{- end }}
{{- if not .sasl_kerberos_principal }}
{{- fail (printf "cluster %s uses GSSAPI: set config.clusters[%s].sasl_kerberos_principal (name@REALM, the principal whose key keytab-%s holds)" .name .name .name) }}
{{- end }}
{{- if not $.Values.kerberos.keytabSecret }}
{{- fail (printf "cluster %s uses GSSAPI: set kerberos.keytabSecret, a Secret with the key keytab-%s (kubectl create secret generic NAME --from-file=keytab-%s=FILE)" .name .name .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.kerberos.krb5Conf .Values.kerberos.krb5ConfConfigMap }}
{{- fail "set kerberos.krb5Conf or kerberos.krb5ConfConfigMap, not both" }}
{{- end }}
{{- end }}

{{- define "txnwatch.volumes" -}}
- name: config
  configMap:
    name: {{ include "txnwatch.fullname" . }}
- name: tmp
  emptyDir: {}
- name: data
{{- if and .Values.persistence.enabled (not (include "txnwatch.externalDatabase" .)) }}
  persistentVolumeClaim:
    claimName: {{ default (printf "%s-data" (include "txnwatch.fullname" .)) .Values.persistence.existingClaim }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- if include "txnwatch.hasSasl" . }}
{{- /* SASL passwords as files, never spliced into an environment variable or JSON. */}}
- name: sasl-passwords
  secret:
    secretName: {{ include "txnwatch.secretName" . }}
    defaultMode: 0440
    items:
      {{- range .Values.config.clusters }}
      {{- if include "txnwatch.usesPassword" . }}
      - {key: {{ printf "sasl-password-%s" .name }}, path: {{ printf "sasl-password-%s" .name }}}
      {{- end }}
      {{- end }}
{{- end }}
{{- if include "txnwatch.hasKerberos" . }}
{{- /* Each GSSAPI cluster's keytab and the krb5.conf in one read-only directory. */}}
{{- $k := .Values.kerberos }}
- name: kerberos
  projected:
    defaultMode: 0440
    sources:
      - secret:
          name: {{ $k.keytabSecret }}
          items:
            {{- range .Values.config.clusters }}
            {{- if eq (default "" .sasl_mechanism) "GSSAPI" }}
            - {key: {{ printf "keytab-%s" .name }}, path: {{ printf "keytab-%s" .name }}}
            {{- end }}
            {{- end }}
            {{- if not (or $k.krb5Conf $k.krb5ConfConfigMap) }}
            - {key: krb5.conf, path: krb5.conf}
            {{- end }}
      {{- if or $k.krb5Conf $k.krb5ConfConfigMap }}
      - configMap:
          name: {{ default (include "txnwatch.fullname" .) $k.krb5ConfConfigMap }}
          items:
            - {key: krb5.conf, path: krb5.conf}
      {{- end }}
{{- end }}
{{- if .Values.archive.existingClaim }}
- name: archive
  persistentVolumeClaim:
    claimName: {{ .Values.archive.existingClaim }}
{{- end }}
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "txnwatch.volumeMounts" -}}
- name: config
  mountPath: /etc/txnwatch/config.yaml
  subPath: config.yaml
  readOnly: true
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /var/lib/txnwatch
{{- if include "txnwatch.hasSasl" . }}
- name: sasl-passwords
  mountPath: {{ include "txnwatch.secretsDir" . }}
  readOnly: true
{{- end }}
{{- if include "txnwatch.hasKerberos" . }}
- name: kerberos
  mountPath: {{ include "txnwatch.kerberosDir" . }}
  readOnly: true
{{- end }}
{{- if .Values.archive.existingClaim }}
- name: archive
  mountPath: /var/lib/txnwatch/archive
{{- end }}
{{- with .Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The pipeline's image: PySpark and Java 17 on top of the daemon's (Dockerfile target `pipeline`),
     by default the release's image repository with "-pipeline" appended to its tag. */}}
{{- define "txnwatch.pipelineImage" -}}
{{- $p := default (dict) .Values.pipeline.image }}
{{- $repository := default .Values.image.repository $p.repository }}
{{- $tag := default (printf "%s-pipeline" (default .Chart.AppVersion .Values.image.tag)) $p.tag }}
{{- printf "%s:%s" $repository $tag }}
{{- end }}

{{/* Labels of the pipeline's pods: their own name, so the Deployment's, Service's, PodDisruptionBudget's
     and NetworkPolicy's selectors (name + instance) never pick a pipeline pod up as a daemon replica. */}}
{{- define "txnwatch.pipelineSelectorLabels" -}}
app.kubernetes.io/name: {{ include "txnwatch.name" . }}-pipeline
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: pipeline
{{- end }}

{{/* "true" when the Spark master is a cluster (not local[...]): the pod is then the driver that executors
     connect back to. */}}
{{- define "txnwatch.pipelineRemote" -}}
{{- if not (hasPrefix "local" .Values.pipeline.spark.master) }}true{{- end }}
{{- end }}

{{- define "txnwatch.pipelineK8s" -}}
{{- if hasPrefix "k8s://" .Values.pipeline.spark.master }}true{{- end }}
{{- end }}
